#!/usr/bin/env python3
"""Writes detector and OCR shaped ONNX models as real exporters emit them (PyTorch's TorchScript exporter, opset 17,
dynamic batch, seeded random weights with random BatchNorm statistics):

- ppocr_rec.onnx: a PP-OCR-like text recogniser, 48x320: PP-LCNet-style backbone (Conv + BN + HardSwish written as
  `x * clamp(x + 3, 0, 6) / 6`, depthwise-separable blocks, SE blocks with HardSigmoid written `clamp(x + 3, 0, 6) / 6`,
  stride (2, 1) stages that keep the width), an SVTR-like neck (two transformer blocks whose LayerNorm is written as
  ReduceMean/Sub/Pow/Sqrt/Div, attention with MatMul/Transpose/Softmax, a GELU MLP through Erf) and a CTC head.
- db_det.onnx: a DB-like text detector, 320x320: the same backbone at strides 4-32, an FPN with nearest and bilinear
  Resize upsampling, Add and Concat, and a head of Conv + BN + ReLU and two ConvTranspose up to the input size.
- yolov8n.onnx: a YOLOv8n-like detector, 320x320, laid out as Ultralytics' yolov8n.yaml (width 0.25, depth 0.33):
  Conv + BN + SiLU (exported `x * Sigmoid(x)`), C2f blocks with Split/Concat, SPPF max pools, nearest Resize, and the
  Detect head with DFL (Softmax + 1x1 Conv) and anchor decoding.

Runs in Benchmarks/out/venv-torch (run.sh creates it with a CPU torch wheel).

usage: make_real_models.py OUT_DIR
"""
import os
import sys

import torch
from torch import nn
import torch.nn.functional as F


def hard_swish(x):
    return x * torch.clamp(x + 3, 0, 6) / 6


def hard_sigmoid(x):
    return torch.clamp(x + 3, 0, 6) / 6


def randomize_norms(model, seed):
    """Random BatchNorm statistics and affine parameters, so folding sees non-trivial values."""
    g = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            n = m.num_features
            m.weight.data = torch.rand(n, generator=g) + 0.5
            m.bias.data = torch.randn(n, generator=g) * 0.1
            m.running_mean.data = torch.randn(n, generator=g) * 0.1
            m.running_var.data = torch.rand(n, generator=g) + 0.5


class ConvBN(nn.Module):
    """Conv + BN + activation ('hswish', 'relu', 'silu' or None)."""

    def __init__(self, cin, cout, k, stride=1, groups=1, act="hswish"):
        super().__init__()
        pad = k // 2
        self.conv = nn.Conv2d(cin, cout, k, stride, pad, groups=groups, bias=False)
        self.bn = nn.BatchNorm2d(cout)
        self.act = act

    def forward(self, x):
        x = self.bn(self.conv(x))
        if self.act == "hswish":
            return hard_swish(x)
        if self.act == "relu":
            return F.relu(x)
        if self.act == "silu":
            return x * torch.sigmoid(x)
        return x


class SE(nn.Module):
    """Squeeze-and-excitation as PP-LCNet has it: pool, 1x1 reduce + ReLU, 1x1 expand + HardSigmoid, scale."""

    def __init__(self, c):
        super().__init__()
        self.reduce = nn.Conv2d(c, c // 4, 1)
        self.expand = nn.Conv2d(c // 4, c, 1)

    def forward(self, x):
        s = F.adaptive_avg_pool2d(x, 1)
        s = F.relu(self.reduce(s))
        return x * hard_sigmoid(self.expand(s))


class DepthwiseSeparable(nn.Module):
    """Depthwise kxk + BN + HardSwish, optional SE, pointwise 1x1 + BN + HardSwish."""

    def __init__(self, cin, cout, stride, k=3, se=False):
        super().__init__()
        self.dw = ConvBN(cin, cin, k, stride, groups=cin)
        self.se = SE(cin) if se else None
        self.pw = ConvBN(cin, cout, 1)

    def forward(self, x):
        x = self.dw(x)
        if self.se is not None:
            x = self.se(x)
        return self.pw(x)


def lcnet_blocks(rec):
    """PP-LCNet x0.5-ish stages; the recogniser uses (2, 1) strides after the second stage."""
    s = (2, 1) if rec else 2
    return [
        [(16, 32, 1, 3, False)],
        [(32, 64, 2, 3, False), (64, 64, 1, 3, False)],
        [(64, 128, s, 3, False), (128, 128, 1, 3, False)],
        [(128, 256, s, 3, False)] + [(256, 256, 1, 5, False)] * 3,
        [(256, 512, s, 5, True), (512, 512, 1, 5, True)],
    ]


class Backbone(nn.Module):
    def __init__(self, rec):
        super().__init__()
        self.stem = ConvBN(3, 16, 3, 2)
        self.stages = nn.ModuleList(
            nn.Sequential(*[DepthwiseSeparable(a, b, st, k, se) for a, b, st, k, se in stage]) for stage in lcnet_blocks(rec))

    def forward(self, x):
        x = self.stem(x)
        feats = []
        for stage in self.stages:
            x = stage(x)
            feats.append(x)
        return feats


class LayerNormDecomposed(nn.Module):
    """LayerNorm written out, as older exporters and hand-written models emit it."""

    def __init__(self, c):
        super().__init__()
        self.weight = nn.Parameter(torch.rand(c) + 0.5)
        self.bias = nn.Parameter(torch.randn(c) * 0.1)

    def forward(self, x):
        mean = x.mean(-1, keepdim=True)
        d = x - mean
        var = d.pow(2).mean(-1, keepdim=True)
        return d / torch.sqrt(var + 1e-5) * self.weight + self.bias


class TransformerBlock(nn.Module):
    def __init__(self, c, heads):
        super().__init__()
        self.heads = heads
        self.norm1 = LayerNormDecomposed(c)
        self.qkv = nn.Linear(c, 3 * c)
        self.proj = nn.Linear(c, c)
        self.norm2 = LayerNormDecomposed(c)
        self.fc1 = nn.Linear(c, 2 * c)
        self.fc2 = nn.Linear(2 * c, c)

    def forward(self, x):
        n, t, c = x.shape
        h = self.norm1(x)
        qkv = self.qkv(h).reshape(n, t, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = torch.softmax((q @ k.transpose(-2, -1)) * (c // self.heads) ** -0.5, dim=-1)
        h = (attn @ v).transpose(1, 2).reshape(n, t, c)
        x = x + self.proj(h)
        h = self.fc2(F.gelu(self.fc1(self.norm2(x))))
        return x + h


class Recognizer(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = Backbone(rec=True)
        self.neck_in = ConvBN(512, 120, 1)
        self.blocks = nn.Sequential(TransformerBlock(120, 8), TransformerBlock(120, 8))
        self.neck_out = ConvBN(120, 512, 1)
        self.head = nn.Linear(512, 97)

    def forward(self, x):
        x = self.backbone(x)[-1]
        x = F.avg_pool2d(x, (2, 2))
        x = self.neck_in(x)
        n, c, h, w = x.shape
        seq = x.flatten(2).transpose(1, 2)
        seq = self.blocks(seq)
        x = seq.transpose(1, 2).reshape(n, c, h, w)
        x = self.neck_out(x)
        seq = x.squeeze(2).transpose(1, 2)
        return torch.softmax(self.head(seq), dim=-1)


class Detector(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = Backbone(rec=False)
        chans = [64, 128, 256, 512]
        self.lateral = nn.ModuleList(nn.Conv2d(c, 96, 1, bias=False) for c in chans)
        self.smooth = nn.ModuleList(nn.Conv2d(96, 24, 3, padding=1, bias=False) for _ in chans)
        self.head = nn.Sequential(
            nn.Conv2d(96, 24, 3, padding=1, bias=False), nn.BatchNorm2d(24), nn.ReLU(),
            nn.ConvTranspose2d(24, 24, 2, 2), nn.BatchNorm2d(24), nn.ReLU(),
            nn.ConvTranspose2d(24, 1, 2, 2), nn.Sigmoid())

    def forward(self, x):
        c2, c3, c4, c5 = self.backbone(x)[1:]
        in5, in4, in3, in2 = (l(c) for l, c in zip(self.lateral[::-1], (c5, c4, c3, c2)))
        out4 = in4 + F.interpolate(in5, scale_factor=2, mode="nearest")
        out3 = in3 + F.interpolate(out4, scale_factor=2, mode="nearest")
        out2 = in2 + F.interpolate(out3, scale_factor=2, mode="bilinear", align_corners=False)
        p5 = F.interpolate(self.smooth[3](in5), scale_factor=8, mode="nearest")
        p4 = F.interpolate(self.smooth[2](out4), scale_factor=4, mode="nearest")
        p3 = F.interpolate(self.smooth[1](out3), scale_factor=2, mode="bilinear", align_corners=False)
        p2 = self.smooth[0](out2)
        return self.head(torch.cat([p5, p4, p3, p2], 1))


class Bottleneck(nn.Module):
    def __init__(self, c, shortcut):
        super().__init__()
        self.cv1 = ConvBN(c, c, 3, act="silu")
        self.cv2 = ConvBN(c, c, 3, act="silu")
        self.add = shortcut

    def forward(self, x):
        y = self.cv2(self.cv1(x))
        return x + y if self.add else y


class C2f(nn.Module):
    def __init__(self, cin, cout, n, shortcut):
        super().__init__()
        self.c = cout // 2
        self.cv1 = ConvBN(cin, 2 * self.c, 1, act="silu")
        self.cv2 = ConvBN((2 + n) * self.c, cout, 1, act="silu")
        self.m = nn.ModuleList(Bottleneck(self.c, shortcut) for _ in range(n))

    def forward(self, x):
        y = list(self.cv1(x).chunk(2, 1))
        for m in self.m:
            y.append(m(y[-1]))
        return self.cv2(torch.cat(y, 1))


class SPPF(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.cv1 = ConvBN(cin, cin // 2, 1, act="silu")
        self.cv2 = ConvBN(cin * 2, cout, 1, act="silu")

    def forward(self, x):
        x = self.cv1(x)
        y1 = F.max_pool2d(x, 5, 1, 2)
        y2 = F.max_pool2d(y1, 5, 1, 2)
        y3 = F.max_pool2d(y2, 5, 1, 2)
        return self.cv2(torch.cat([x, y1, y2, y3], 1))


class Yolo(nn.Module):
    def __init__(self, size=320, classes=80):
        super().__init__()
        s = lambda a, b, k=3, st=1: ConvBN(a, b, k, st, act="silu")
        self.b0, self.b1, self.b2 = s(3, 16, 3, 2), s(16, 32, 3, 2), C2f(32, 32, 1, True)
        self.b3, self.b4 = s(32, 64, 3, 2), C2f(64, 64, 2, True)
        self.b5, self.b6 = s(64, 128, 3, 2), C2f(128, 128, 2, True)
        self.b7, self.b8, self.b9 = s(128, 256, 3, 2), C2f(256, 256, 1, True), SPPF(256, 256)
        self.h12, self.h15 = C2f(384, 128, 1, False), C2f(192, 64, 1, False)
        self.h16, self.h18 = s(64, 64, 3, 2), C2f(192, 128, 1, False)
        self.h19, self.h21 = s(128, 128, 3, 2), C2f(384, 256, 1, False)
        self.reg_max, self.classes = 16, classes
        c2, c3 = 64, max(64, classes)
        self.box = nn.ModuleList(nn.Sequential(s(c, c2), s(c2, c2), nn.Conv2d(c2, 4 * self.reg_max, 1)) for c in (64, 128, 256))
        self.cls = nn.ModuleList(nn.Sequential(s(c, c3), s(c3, c3), nn.Conv2d(c3, classes, 1)) for c in (64, 128, 256))
        self.dfl = nn.Conv2d(self.reg_max, 1, 1, bias=False)
        self.dfl.weight.data = torch.arange(self.reg_max, dtype=torch.float32).view(1, self.reg_max, 1, 1)
        anchors, strides = [], []
        for stride in (8, 16, 32):
            n = size // stride
            ys, xs = torch.meshgrid(torch.arange(n) + 0.5, torch.arange(n) + 0.5, indexing="ij")
            anchors.append(torch.stack([xs, ys], -1).view(-1, 2))
            strides.append(torch.full((n * n, 1), float(stride)))
        self.register_buffer("anchors", torch.cat(anchors).transpose(0, 1).unsqueeze(0))
        self.register_buffer("strides", torch.cat(strides).transpose(0, 1).unsqueeze(0))

    def forward(self, x):
        up = lambda t: F.interpolate(t, scale_factor=2, mode="nearest")
        x = self.b2(self.b1(self.b0(x)))
        p3 = self.b4(self.b3(x))
        p4 = self.b6(self.b5(p3))
        p5 = self.b9(self.b8(self.b7(p4)))
        h12 = self.h12(torch.cat([up(p5), p4], 1))
        o3 = self.h15(torch.cat([up(h12), p3], 1))
        o4 = self.h18(torch.cat([self.h16(o3), h12], 1))
        o5 = self.h21(torch.cat([self.h19(o4), p5], 1))
        n = x.shape[0]
        outs = [torch.cat([self.box[i](o), self.cls[i](o)], 1).view(n, 4 * self.reg_max + self.classes, -1)
                for i, o in enumerate((o3, o4, o5))]
        y = torch.cat(outs, 2)
        box, cls = y.split((4 * self.reg_max, self.classes), 1)
        b, _, a = box.shape
        dist = self.dfl(box.view(b, 4, self.reg_max, a).transpose(2, 1).softmax(1)).view(b, 4, a)
        lt, rb = dist.chunk(2, 1)
        x1y1, x2y2 = self.anchors - lt, self.anchors + rb
        boxes = torch.cat(((x1y1 + x2y2) / 2, x2y2 - x1y1), 1) * self.strides
        return torch.cat((boxes, cls.sigmoid()), 1)


def export(model, shape, path, seed):
    torch.manual_seed(seed)
    randomize_norms(model, seed)
    model.eval()
    x = torch.rand(1, *shape)
    torch.onnx.export(model, (x,), path, input_names=["input"], output_names=["output"], opset_version=17,
                      dynamic_axes={"input": {0: "N"}, "output": {0: "N"}}, dynamo=False)
    print(f"wrote {path}")


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    export(Recognizer(), (3, 48, 320), os.path.join(out, "ppocr_rec.onnx"), 1)
    export(Detector(), (3, 320, 320), os.path.join(out, "db_det.onnx"), 2)
    export(Yolo(), (3, 320, 320), os.path.join(out, "yolov8n.onnx"), 3)


if __name__ == "__main__":
    main()
