-- wrk script: POST the bytes of file $REQUEST_BODY on keep-alive connections (Content-Type $CONTENT_TYPE; for a V2
-- binary-extension body, $REQUEST_HDR_LEN is its JSON part's length) and print a one-line JSON summary for the driver.
local f = assert(io.open(os.getenv("REQUEST_BODY"), "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = os.getenv("CONTENT_TYPE") or "application/octet-stream"
if os.getenv("REQUEST_HDR_LEN") then
  wrk.headers["Inference-Header-Content-Length"] = os.getenv("REQUEST_HDR_LEN")
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRK_JSON {"requests":%d,"duration_us":%d,"bytes":%d,"status_errors":%d,"socket_errors":%d,"p50_us":%d,"p90_us":%d,"p99_us":%d,"max_us":%d,"mean_us":%.1f}\n',
    summary.requests, summary.duration, summary.bytes, e.status, e.connect + e.read + e.write + e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max, latency.mean))
end
