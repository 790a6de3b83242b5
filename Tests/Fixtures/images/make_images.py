#!/usr/bin/env python3
"""Generates the Imaging test fixtures (seeded, deterministic) with Pillow and numpy.

For every `<name>.png` / `<name>.jpg` it writes `<name>.rgb`: the RGB bytes (height x width x 3) that Pillow
decodes after `ImageOps.exif_transpose` and alpha compositing onto white (`Image.alpha_composite`), except for
16-bit PNGs, whose reference is numpy's round(v / 257) (libpng's 16-to-8 scaling; Pillow truncates or clips).
`preprocess.json` lists preprocessing cases: a config (the config.json `image` keys), the source image, the
output shape and a float32 little-endian `.f32` reference made by Pillow resize + numpy normalisation.
Broken inputs (truncated, corrupt, empty, decompression bombs) have no reference.

Usage: python3 Tests/Fixtures/images/make_images.py
"""
import io
import json
import os
import struct
import zlib

import numpy as np
from PIL import Image, ImageOps

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(1234)


def path(name):
    return os.path.join(HERE, name)


def scene(width, height):
    """Smooth gradients plus a few hard-edged shapes: exercises filters without JPEG blowing up."""
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float64)
    r = 255 * xx / max(width - 1, 1)
    g = 255 * yy / max(height - 1, 1)
    b = 128 + 100 * np.sin(xx / 3.0) * np.cos(yy / 4.0)
    img = np.stack([r, g, b], axis=-1)
    img[height // 4: height // 2, width // 5: width // 2] = [250, 20, 30]
    img[height // 2:, width // 2: width // 2 + 3] = [10, 10, 10]
    img += rng.normal(0, 6, img.shape)
    return np.clip(np.round(img), 0, 255).astype(np.uint8)


def save_rgb(name, array):
    assert array.dtype == np.uint8 and array.ndim == 3 and array.shape[2] == 3
    with open(path(name), "wb") as f:
        f.write(array.tobytes())


def pillow_rgb(filename):
    im = Image.open(path(filename))
    im.load()
    im = ImageOps.exif_transpose(im)
    if im.mode in ("RGBA", "LA", "PA") or (im.mode == "P" and "transparency" in im.info) or im.mode == "La":
        rgba = im.convert("RGBA")
        bg = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return np.asarray(Image.alpha_composite(bg, rgba).convert("RGB"))
    return np.asarray(im.convert("RGB"))


# ---- a small PNG writer for what Pillow cannot write (16-bit colour, Adam7 interlace, bombs) ----
def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def png_bytes(pixels, bit_depth, color_type, interlace=False, extra_chunks=()):
    """pixels: (h, w, channels) uint8/uint16 array of samples."""
    h, w = pixels.shape[:2]
    dtype = ">u2" if bit_depth == 16 else "u1"
    samples = pixels.astype(dtype)

    def scanlines(sub):
        return b"".join(b"\x00" + sub[row].tobytes() for row in range(sub.shape[0]))

    if not interlace:
        raw = scanlines(samples)
    else:
        raw = b""
        for xs, ys, dx, dy in [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]:
            sub = samples[ys::dy, xs::dx]
            if sub.shape[0] and sub.shape[1]:
                raw += scanlines(np.ascontiguousarray(sub))
    ihdr = struct.pack(">IIBBBBB", w, h, bit_depth, color_type, 0, 0, 1 if interlace else 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + b"".join(extra_chunks)
            + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def write(name, data):
    with open(path(name), "wb") as f:
        f.write(data)


W, H = 23, 17
base = scene(W, H)
alpha = np.clip(rng.integers(0, 256, (H, W)), 0, 255).astype(np.uint8)
alpha[0, :] = 0
alpha[1, :] = 255

# ---- PNG variants ----
Image.fromarray(base, "RGB").save(path("png_rgb8.png"))
save_rgb("png_rgb8.rgb", pillow_rgb("png_rgb8.png"))

gray = np.asarray(Image.fromarray(base, "RGB").convert("L"))
Image.fromarray(gray, "L").save(path("png_gray8.png"))
save_rgb("png_gray8.rgb", pillow_rgb("png_gray8.png"))

Image.fromarray(np.dstack([base, alpha]), "RGBA").save(path("png_rgba8.png"))
save_rgb("png_rgba8.rgb", pillow_rgb("png_rgba8.png"))

Image.fromarray(np.dstack([gray, alpha]), "LA").save(path("png_gray_alpha8.png"))
save_rgb("png_gray_alpha8.rgb", pillow_rgb("png_gray_alpha8.png"))

palette_image = Image.fromarray(base, "RGB").quantize(colors=16, method=Image.Quantize.MEDIANCUT)
palette_image.save(path("png_palette.png"))
save_rgb("png_palette.rgb", pillow_rgb("png_palette.png"))
trns = bytes([0, 128] + [255] * 14)
palette_image.save(path("png_palette_trns.png"), transparency=trns)
save_rgb("png_palette_trns.rgb", pillow_rgb("png_palette_trns.png"))

rgb16 = (base.astype(np.uint32) * 257 + rng.integers(-100, 101, base.shape)).clip(0, 65535).astype(np.uint16)
write("png_rgb16.png", png_bytes(rgb16, 16, 2))
save_rgb("png_rgb16.rgb", np.round(rgb16 / 257.0).astype(np.uint8))
gray16 = (gray.astype(np.uint32) * 257 + rng.integers(-100, 101, gray.shape)).clip(0, 65535).astype(np.uint16)
write("png_gray16.png", png_bytes(gray16[..., None], 16, 0))
save_rgb("png_gray16.rgb", np.repeat(np.round(gray16 / 257.0).astype(np.uint8)[..., None], 3, axis=2))
rgba16 = np.dstack([rgb16, (alpha.astype(np.uint16) * 257)])
write("png_rgba16.png", png_bytes(rgba16, 16, 6))
a = alpha.astype(np.float64)[..., None] / 255.0
save_rgb("png_rgba16.rgb", np.round(np.round(rgb16 / 257.0) * a + 255 * (1 - a)).astype(np.uint8))

write("png_interlaced.png", png_bytes(base, 8, 2, interlace=True))
assert np.array_equal(pillow_rgb("png_interlaced.png"), base)
save_rgb("png_interlaced.rgb", base)
write("png_interlaced_rgba.png", png_bytes(np.dstack([base, alpha]), 8, 6, interlace=True))
save_rgb("png_interlaced_rgba.rgb", pillow_rgb("png_interlaced_rgba.png"))

# gAMA 1.0 (linear): Pillow ignores the chunk and returns the stored values; so must we.
write("png_gamma1.png", png_bytes(base, 8, 2, extra_chunks=[chunk(b"gAMA", struct.pack(">I", 100000))]))
save_rgb("png_gamma1.rgb", pillow_rgb("png_gamma1.png"))
assert np.array_equal(pillow_rgb("png_gamma1.png"), base)

def ycck_jpeg(cmyk):
    """A YCCK JPEG (Adobe transform 2) via TurboJPEG, which Pillow cannot write; stored inverted (Adobe)."""
    import ctypes
    tj = ctypes.CDLL("libturbojpeg.so.0")
    tj.tjInitCompress.restype = ctypes.c_void_p
    handle = ctypes.c_void_p(tj.tjInitCompress())
    h, w = cmyk.shape[:2]
    src = np.ascontiguousarray(255 - cmyk)
    out = ctypes.POINTER(ctypes.c_ubyte)()
    size = ctypes.c_ulong(0)
    TJPF_CMYK, TJSAMP_420 = 11, 2
    rc = tj.tjCompress2(handle, src.ctypes.data_as(ctypes.c_void_p), w, 0, h, TJPF_CMYK, ctypes.byref(out),
                        ctypes.byref(size), TJSAMP_420, 95, 0)
    assert rc == 0, "tjCompress2 failed"
    data = ctypes.string_at(out, size.value)
    tj.tjFree(out)
    tj.tjDestroy(handle)
    i = data.find(b"Adobe")
    assert i > 0 and data[i + 11] == 2, "expected an Adobe YCCK marker"
    return data


# ---- JPEG variants ----
JW, JH = 40, 30
jbase = scene(JW, JH)
Image.fromarray(jbase, "RGB").save(path("jpeg_baseline.jpg"), quality=92)
save_rgb("jpeg_baseline.rgb", pillow_rgb("jpeg_baseline.jpg"))
Image.fromarray(jbase, "RGB").save(path("jpeg_progressive.jpg"), quality=92, progressive=True)
save_rgb("jpeg_progressive.rgb", pillow_rgb("jpeg_progressive.jpg"))
Image.fromarray(jbase, "RGB").convert("L").save(path("jpeg_gray.jpg"), quality=92)
save_rgb("jpeg_gray.rgb", pillow_rgb("jpeg_gray.jpg"))
Image.fromarray(jbase, "RGB").convert("CMYK").save(path("jpeg_cmyk.jpg"), quality=95)
save_rgb("jpeg_cmyk.rgb", pillow_rgb("jpeg_cmyk.jpg"))
write("jpeg_ycck.jpg", ycck_jpeg(np.asarray(Image.fromarray(jbase, "RGB").convert("CMYK"))))
save_rgb("jpeg_ycck.rgb", pillow_rgb("jpeg_ycck.jpg"))
Image.fromarray(jbase, "RGB").save(path("jpeg_444.jpg"), quality=92, subsampling=0)
save_rgb("jpeg_444.rgb", pillow_rgb("jpeg_444.jpg"))
for orientation in range(1, 9):
    exif = Image.Exif()
    exif[0x0112] = orientation
    name = f"jpeg_orientation{orientation}"
    Image.fromarray(jbase, "RGB").save(path(name + ".jpg"), quality=92, exif=exif.tobytes())
    save_rgb(name + ".rgb", pillow_rgb(name + ".jpg"))


def big_endian_exif_app1(orientation):
    tiff = b"MM\x00\x2a" + struct.pack(">I", 8) + struct.pack(">H", 1)
    tiff += struct.pack(">HHIHH", 0x0112, 3, 1, orientation, 0) + struct.pack(">I", 0)
    payload = b"Exif\x00\x00" + tiff
    return b"\xff\xe1" + struct.pack(">H", len(payload) + 2) + payload


plain = open(path("jpeg_baseline.jpg"), "rb").read()
write("jpeg_orientation6_be.jpg", plain[:2] + big_endian_exif_app1(6) + plain[2:])
save_rgb("jpeg_orientation6_be.rgb", pillow_rgb("jpeg_orientation6_be.jpg"))

# ---- broken and hostile inputs ----
png_full = open(path("png_rgb8.png"), "rb").read()
write("bad_truncated.png", png_full[: len(png_full) // 2])
corrupt = bytearray(png_full)
idat = corrupt.find(b"IDAT")
for i in range(idat + 8, idat + 40):
    corrupt[i] ^= 0x5A
write("bad_corrupt.png", bytes(corrupt))
write("bad_truncated.jpg", plain[: len(plain) // 2])
write("bad_header_only.jpg", plain[:20])
write("bad_empty.png", b"")
write("bad_text.txt", b"hello, this is not an image\n")
write("bad_gif.gif", b"GIF89a\x01\x00\x01\x00\x00\x00\x00;")
# 100000 x 100000 PNG: valid IHDR, tiny IDAT (never read).
ihdr = struct.pack(">IIBBBBB", 100000, 100000, 8, 2, 0, 0, 0)
write("bomb.png", b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\x00" * 64))
      + chunk(b"IEND", b""))
# 60000 x 60000 JPEG: a real small JPEG whose SOF dimensions are patched (JPEG maxes out at 65535).
bomb = bytearray(plain)
sof = bomb.find(b"\xff\xc0")
bomb[sof + 5: sof + 9] = struct.pack(">HH", 60000, 60000)
write("bomb.jpg", bytes(bomb))

# ---- preprocessing references ----
PW, PH = 61, 47
pre_src = scene(PW, PH)
Image.fromarray(pre_src, "RGB").save(path("pre_source.png"))
src = Image.open(path("pre_source.png")).convert("RGB")
IMAGENET_MEAN = [0.485, 0.456, 0.406]
IMAGENET_STD = [0.229, 0.224, 0.225]
FILTERS = {"bilinear": Image.Resampling.BILINEAR, "nearest": Image.Resampling.NEAREST, "area": Image.Resampling.BOX}


def reference(cfg):
    im = src
    order = cfg.get("channel_order", "rgb")
    if order == "gray":
        im = im.convert("L")
    w, h = cfg["width"], cfg["height"]
    flt = FILTERS[cfg.get("interpolation", "bilinear")]
    mode = cfg.get("resize_mode", "stretch")
    if mode == "stretch":
        im = im.resize((w, h), flt)
    elif mode == "center_crop":
        s = cfg["resize_size"]
        if PW <= PH:
            nw, nh = s, int(s * PH / PW)
        else:
            nw, nh = int(s * PW / PH), s
        im = im.resize((nw, nh), flt)
        left = int(round((nw - w) / 2.0))
        top = int(round((nh - h) / 2.0))
        im = im.crop((left, top, left + w, top + h))
    elif mode == "letterbox":
        k = min(w / PW, h / PH)
        nw, nh = max(1, int(round(PW * k))), max(1, int(round(PH * k)))
        resized = im.resize((nw, nh), flt)
        pad = cfg.get("pad_value", 0)
        canvas = Image.new(im.mode, (w, h), pad if im.mode == "L" else (pad, pad, pad))
        canvas.paste(resized, ((w - nw) // 2, (h - nh) // 2))
        im = canvas
    arr = np.asarray(im).astype(np.float32)
    if arr.ndim == 2:
        arr = arr[..., None]
    if order == "bgr":
        arr = arr[..., ::-1]
    if cfg.get("dtype", "float32") == "uint8":
        out = arr.astype(np.uint8)
    else:
        c = arr.shape[2]
        scale = cfg.get("scale", 1 / 255)
        mean = np.array(cfg.get("mean", [0.0] * c), np.float32)
        std = np.array(cfg.get("std", [1.0] * c), np.float32)
        out = ((arr * np.float32(scale) - mean) / std).astype(np.float32)
    if cfg.get("layout", "nchw") == "nchw":
        out = out.transpose(2, 0, 1)
    return np.ascontiguousarray(out[None])


cases = [
    ("stretch_bilinear_imagenet", {"width": 32, "height": 24, "resize_mode": "stretch", "interpolation": "bilinear",
                                   "mean": IMAGENET_MEAN, "std": IMAGENET_STD}),
    ("center_crop_bgr_nhwc", {"width": 32, "height": 32, "resize_mode": "center_crop", "resize_size": 40,
                              "channel_order": "bgr", "layout": "nhwc", "scale": 1.0}),
    ("letterbox_pad", {"width": 40, "height": 40, "resize_mode": "letterbox", "pad_value": 114,
                       "scale": 0.00392156862745098}),
    ("gray_area_digits", {"width": 8, "height": 8, "interpolation": "area", "channel_order": "gray",
                          "scale": -16 / 255, "mean": [-16.0], "std": [1.0]}),
    ("nearest_stretch", {"width": 20, "height": 30, "interpolation": "nearest", "scale": 1.0}),
    ("upscale_bilinear", {"width": 90, "height": 70, "interpolation": "bilinear", "mean": [0.5, 0.5, 0.5],
                          "std": [0.5, 0.5, 0.5]}),
    ("uint8_nhwc", {"width": 16, "height": 12, "layout": "nhwc", "dtype": "uint8"}),
    ("area_letterbox_tall", {"width": 20, "height": 50, "resize_mode": "letterbox", "interpolation": "area",
                             "pad_value": 0}),
]
listing = []
for name, cfg in cases:
    ref = reference(cfg)
    suffix = ".u8" if ref.dtype == np.uint8 else ".f32"
    with open(path("pre_" + name + suffix), "wb") as f:
        f.write(ref.astype("<f4" if ref.dtype == np.float32 else "u1").tobytes())
    listing.append({"name": name, "source": "pre_source.png", "config": cfg, "shape": list(ref.shape),
                    "reference": "pre_" + name + suffix})
with open(path("preprocess.json"), "w") as f:
    json.dump(listing, f, indent=1)
    f.write("\n")

total = sum(os.path.getsize(path(n)) for n in os.listdir(HERE))
print(f"wrote {len(os.listdir(HERE))} files, {total} bytes")
