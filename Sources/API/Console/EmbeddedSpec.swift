// Generated from openapi.yaml by .ci/embed-spec (`make spec`); do not edit.

/// openapi.yaml, as served at `GET /openapi.yaml`.
public enum EmbeddedSpec {
    /// The spec's Content-Type.
    public static let contentType = "application/yaml"

    /// The text of openapi.yaml, byte for byte.
    public static let text = ##"""
openapi: 3.1.0
info:
  title: Osprey model server
  version: 0.1.0
  summary: KServe V2 / Open Inference Protocol over HTTP/1.1, image classification, model repository and metrics.
  description: |
    Osprey serves ONNX models. Inference follows the KServe V2 (Open Inference Protocol) REST API with
    Triton's binary tensor data and classification extensions, so tritonclient and other V2 clients work.

    Ports: this document describes the HTTP/1.1 port (`--port`, default 8080). The gRPC port (`--grpc-port`,
    default 8081, `off` to disable) speaks the same protocol over gRPC (HTTP/2 cleartext, prior knowledge):
    Triton's `inference.GRPCInferenceService` from grpc_service.proto and `grpc.health.v1.Health`; it is not
    described here.

    Conventions:
    - Every error body is `{"error": "<what was expected and what arrived>"}` with `Content-Type: application/json`.
    - Unknown paths answer 404; a known path with another method answers 405 with an `Allow` header, whatever
      the method token (`QUERY`, `PROPFIND`, lowercase `get`: methods are case-sensitive).
      HEAD is accepted wherever GET is; OPTIONS answers 204 with `Allow`.
    - Protocol errors, answered before routing (and the connection is closed): malformed requests and framing
      (including chunk data not followed by CRLF) 400, an HTTP major version other than 1 505, header section over
      `--max-header-bytes` 431, body over `--max-body-bytes` 413, transfer codings other than chunked 501.
    - Repository routes check authorization from the request headers, before the body is read: an unauthenticated
      upload of any size answers 401 (or 403 for a non-loopback client without `--admin-token`), never 413.
    - Per-request limits answer 413 naming the limit and the count: `--max-bytes-elements` (BYTES elements in one
      infer request, default 65536) and `--max-decoded-bytes` (decoded tensor bytes in one infer request, default
      256 MiB) are claimed from each input's declared shape before its data is read; `--max-image-pixels` and
      `--max-image-bytes` (width x height x channels x bytes per sample, default 256 MiB) are read from an image's
      header before it is decoded.
    - When `--max-connections` are open, further connections answer the health probes (`/v2/health/live`,
      `/v2/health/ready`) and 503 to everything else, then close.
    - `{model}` must match `[A-Za-z0-9_.-]{1,64}` (not `.` or `..`) and `{version}` must be a positive integer,
      otherwise 400. Routes without `/versions/{version}` use the model's default version.
    - JSON has no NaN or infinity: non-finite floats in JSON outputs are written as `null`; request binary
      outputs to receive exact IEEE values.
    - BYTES elements in JSON are strings (their UTF-8 bytes are the element), not base64, as in Triton.
    - Every response carries `X-Request-ID` (the client's, or one the server generated).
    - Every response carries `traceparent` (W3C Trace Context): the request's trace continued from a valid
      `traceparent` request header, or a new one; the trace id is logged as `trace_id` in the access log.
    - Compressed request bodies (`Content-Encoding` other than identity) are refused with 415.
    - The request parameter `timeout` (microseconds, as in Triton) bounds the time an inference waits in the queue.
  license:
    name: Apache-2.0
    identifier: Apache-2.0
servers:
  - url: http://localhost:8000
    description: Default local server
tags:
  - name: health
    description: Liveness and readiness
  - name: metadata
    description: Server and model metadata
  - name: inference
    description: V2 inference and image classification
  - name: repository
    description: Model repository management
  - name: observability
    description: Statistics and Prometheus metrics
  - name: console
    description: The web console and this specification
paths:
  /:
    get:
      operationId: console
      tags: [console]
      summary: Web console
      description: |
        One self-contained page (no external assets) showing every model with its versions, states, failure reasons,
        traffic split and cascade; an image panel that classifies a dropped or picked picture with the top-k classes
        as bars, the latency and who answered; live figures from `/metrics` every 3 s; and the admin actions (pin,
        unpin, load, unload) behind a token field.
      parameters:
        - $ref: '#/components/parameters/Traceparent'
      responses:
        '200':
          description: The page.
          headers:
            traceparent:
              $ref: '#/components/headers/Traceparent'
          content:
            text/html:
              schema:
                type: string
  /openapi.yaml:
    get:
      operationId: openAPISpec
      tags: [console]
      summary: This specification
      parameters:
        - $ref: '#/components/parameters/Traceparent'
      responses:
        '200':
          description: openapi.yaml as built into the server.
          headers:
            traceparent:
              $ref: '#/components/headers/Traceparent'
          content:
            application/yaml:
              schema:
                type: string
  /v2:
    get:
      operationId: serverMetadata
      tags: [metadata]
      summary: Server metadata
      parameters:
        - $ref: '#/components/parameters/Traceparent'
      responses:
        '200':
          description: Server name, version and supported protocol extensions.
          headers:
            traceparent:
              $ref: '#/components/headers/Traceparent'
          content:
            application/json:
              schema:
                $ref: '#/components/schemas/ServerMetadata'
        '500':
          $ref: '#/components/responses/InternalError'
  /v2/health/live:
    get:
      operationId: serverLive
      tags: [health]
      summary: Liveness
      description: 200 while the process can serve HTTP; used by orchestrators to restart a wedged server.
      parameters:
        - $ref: '#/components/parameters/Traceparent'
      responses:
        '200':
          description: The server is live.
          headers:
            traceparent:
              $ref: '#/components/headers/Traceparent'
          content:
            application/json:
              schema:
                $ref: '#/components/schemas/Liveness'
        '503':
          $ref: '#/components/responses/Unavailable'
  /v2/health/ready:
    get:
      operationId: serverReady
      tags: [health]
      summary: Readiness
      description: |
        200 when every required model has a READY version: the models named by `--require-models`, else every model
        whose directory held a version at start. Models added later (upload, polling) never make it 503 by failing;
        an empty repository with nothing required is ready. 503 while starting (repository not yet scanned) or draining.
      parameters:
        - $ref: '#/components/parameters/Traceparent'
      responses:
        '200':
          description: Ready.
          headers:
            traceparent:
              $ref: '#/components/headers/Traceparent'
          content:
            application/json:
              schema:
                $ref: '#/components/schemas/Readiness'
        '503':
          description: Not ready (starting, a required model without a READY version, or draining after SIGTERM).
          headers:
            traceparent:
              $ref: '#/components/headers/Traceparent'
          content:
            application/json:
              schema:
                $ref: '#/components/schemas/Readiness'
  /v2/models:
    get:
      operationId: modelList
      tags: [metadata]
      summary: Models, versions and states (public, read-only)
      description: |
        Every model of the repository with its default version, whether that version is pinned, and each version's
        state. Failure reasons are left out (they are for operators: `POST /v2/repository/index`).
      parameters:
        - $ref: '#/components/parameters/Traceparent'
      responses:
        '200':
          description: The models, sorted by name; versions in ascending order.
          headers:
            traceparent:
              $ref: '#/components/headers/Traceparent'
          content:
            application/json:
              schema:
                $ref: '#/components/schemas/ModelList'
  /v2/models/{model}:
    get:
      operationId: modelMetadata
      tags: [metadata]
      summary: Metadata of a model's default version
      parameters:
        - $ref: '#/components/parameters/Traceparent'
        - $ref: '#/components/parameters/Model'
      responses:
        '200':
          description: Model metadata.
          headers:
            traceparent:
              $ref: '#/components/headers/Traceparent'
          content:
            application/json:
              schema:
                $ref: '#/components/schemas/ModelMetadata'
        '400':
          $ref: '#/components/responses/BadRequest'
        '404':
          $ref: '#/components/responses/NotFound'
        '503':
          $ref: '#/components/responses/Unavailable'
  /v2/models/{model}/versions/{version}:
    get:
      operationId: modelVersionMetadata
      tags: [metadata]
      summary: Metadata of one model version
      parameters:
        - $ref: '#/components/parameters/Traceparent'
        - $ref: '#/components/parameters/Model'
        - $ref: '#/components/parameters/Version'
      responses:
        '200':
          description: Model metadata.
          headers:
            traceparent:
              $ref: '#/components/headers/Traceparent'
          content:
            application/json:
              schema:
                $ref: '#/components/schemas/ModelMetadata'
        '400':
          $ref: '#/components/responses/BadRequest'
        '404':
          $ref: '#/components/responses/NotFound'
        '503':
          $ref: '#/components/responses/Unavailable'
  /v2/models/{model}/ready:
    get:
      operationId: modelReady
      tags: [health]
      summary: Readiness of a model's default version
      parameters:
        - $ref: '#/components/parameters/Traceparent'
        - $ref: '#/components/parameters/Model'
      responses:
        '200':
          description: Ready.
          headers:
            traceparent:
              $ref: '#/components/headers/Traceparent'
          content:
            application/json:
              schema:
                $ref: '#/components/schemas/ModelReadiness'
        '400':
          $ref: '#/components/responses/BadRequest'
        '404':
          $ref: '#/components/responses/NotFound'
        '503':
          $ref: '#/components/responses/Unavailable'
  /v2/models/{model}/versions/{version}/ready:
    get:
      operationId: modelVersionReady
      tags: [health]
      summary: Readiness of one model version
      parameters:
        - $ref: '#/components/parameters/Traceparent'
        - $ref: '#/components/parameters/Model'
        - $ref: '#/components/parameters/Version'
      responses:
        '200':
          description: Ready.
          headers:
            traceparent:
              $ref: '#/components/headers/Traceparent'
          content:
            application/json:
              schema:
                $ref: '#/components/schemas/ModelReadiness'
        '400':
          $ref: '#/components/responses/BadRequest'
        '404':
          $ref: '#/components/responses/NotFound'
        '503':
          $ref: '#/components/responses/Unavailable'
  /v2/models/{model}/infer:
    post:
      operationId: modelInfer
      tags: [inference]
      summary: Inference on a model's default version
      parameters:
        - $ref: '#/components/parameters/Traceparent'
        - $ref: '#/components/parameters/Model'
        - $ref: '#/components/parameters/InferenceHeaderContentLength'
      requestBody:
        $ref: '#/components/requestBodies/Inference'
      responses:
        '200':
          $ref: '#/components/responses/Inference'
        '400':
          $ref: '#/components/responses/BadRequest'
        '404':
          $ref: '#/components/responses/NotFound'
        '413':
          $ref: '#/components/responses/PayloadTooLarge'
        '415':
          $ref: '#/components/responses/UnsupportedMediaType'
        '429':
          $ref: '#/components/responses/TooManyRequests'
        '503':
          $ref: '#/components/responses/Unavailable'
        '504':
          $ref: '#/components/responses/Timeout'
  /v2/models/{model}/versions/{version}/infer:
    post:
      operationId: modelVersionInfer
      tags: [inference]
      summary: Inference on one model version
      parameters:
        - $ref: '#/components/parameters/Traceparent'
        - $ref: '#/components/parameters/Model'
        - $ref: '#/components/parameters/Version'
        - $ref: '#/components/parameters/InferenceHeaderContentLength'
      requestBody:
        $ref: '#/components/requestBodies/Inference'
      responses:
        '200':
          $ref: '#/components/responses/Inference'
        '400':
          $ref: '#/components/responses/BadRequest'
        '404':
          $ref: '#/components/responses/NotFound'
        '413':
          $ref: '#/components/responses/PayloadTooLarge'
        '415':
          $ref: '#/components/responses/UnsupportedMediaType'
        '429':
          $ref: '#/components/responses/TooManyRequests'
        '503':
          $ref: '#/components/responses/Unavailable'
        '504':
          $ref: '#/components/responses/Timeout'
  /v2/models/{model}/classify:
    post:
      operationId: modelClassify
      tags: [inference]
      summary: Classify an image with a model's default version
      description: |
        The image is decoded, preprocessed with the model's configuration (resize, crop, normalize, layout)
        and run; the response lists the `top_k` classes per image, highest score first.
      parameters:
        - $ref: '#/components/parameters/Traceparent'
        - $ref: '#/components/parameters/Model'
        - $ref: '#/components/parameters/TopK'
      requestBody:
        $ref: '#/components/requestBodies/Image'
      responses:
        '200':
          $ref: '#/components/responses/Classify'
        '400':
          $ref: '#/components/responses/BadRequest'
        '404':
          $ref: '#/components/responses/NotFound'
        '413':
          $ref: '#/components/responses/PayloadTooLarge'
        '415':
          $ref: '#/components/responses/UnsupportedMediaType'
        '429':
          $ref: '#/components/responses/TooManyRequests'
        '503':
          $ref: '#/components/responses/Unavailable'
        '504':
          $ref: '#/components/responses/Timeout'
  /v2/models/{model}/versions/{version}/classify:
    post:
      operationId: modelVersionClassify
      tags: [inference]
      summary: Classify an image with one model version
      parameters:
        - $ref: '#/components/parameters/Traceparent'
        - $ref: '#/components/parameters/Model'
        - $ref: '#/components/parameters/Version'
        - $ref: '#/components/parameters/TopK'
      requestBody:
        $ref: '#/components/requestBodies/Image'
      responses:
        '200':
          $ref: '#/components/responses/Classify'
        '400':
          $ref: '#/components/responses/BadRequest'
        '404':
          $ref: '#/components/responses/NotFound'
        '413':
          $ref: '#/components/responses/PayloadTooLarge'
        '415':
          $ref: '#/components/responses/UnsupportedMediaType'
        '429':
          $ref: '#/components/responses/TooManyRequests'
        '503':
          $ref: '#/components/responses/Unavailable'
        '504':
          $ref: '#/components/responses/Timeout'
  /v2/models/{model}/config:
    get:
      operationId: modelConfig
      tags: [metadata]
      summary: Configuration of a model's default version (Triton's model configuration extension)
      parameters:
        - $ref: '#/components/parameters/Traceparent'
        - $ref: '#/components/parameters/Model'
      responses:
        '200':
          description: The effective configuration.
          headers:
            traceparent:
              $ref: '#/components/headers/Traceparent'
          content:
            application/json:
              schema:
                $ref: '#/components/schemas/ModelConfig'
        '400':
          $ref: '#/components/responses/BadRequest'
        '404':
          $ref: '#/components/responses/NotFound'
        '503':
          $ref: '#/components/responses/Unavailable'
  /v2/models/{model}/versions/{version}/config:
    get:
      operationId: modelVersionConfig
      tags: [metadata]
      summary: Configuration of one model version
      parameters:
        - $ref: '#/components/parameters/Traceparent'
        - $ref: '#/components/parameters/Model'
        - $ref: '#/components/parameters/Version'
      responses:
        '200':
          description: The effective configuration.
          headers:
            traceparent:
              $ref: '#/components/headers/Traceparent'
          content:
            application/json:
              schema:
                $ref: '#/components/schemas/ModelConfig'
        '400':
          $ref: '#/components/responses/BadRequest'
        '404':
          $ref: '#/components/responses/NotFound'
        '503':
          $ref: '#/components/responses/Unavailable'
  /v2/models/{model}/stats:
    get:
      operationId: modelStats
      tags: [observability]
      summary: Statistics of every loaded version of a model
      parameters:
        - $ref: '#/components/parameters/Traceparent'
        - $ref: '#/components/parameters/Model'
      responses:
        '200':
          $ref: '#/components/responses/Statistics'
        '400':
          $ref: '#/components/responses/BadRequest'
        '404':
          $ref: '#/components/responses/NotFound'
  /v2/models/{model}/versions/{version}/stats:
    get:
      operationId: modelVersionStats
      tags: [observability]
      summary: Statistics of one model version
      parameters:
        - $ref: '#/components/parameters/Traceparent'
        - $ref: '#/components/parameters/Model'
        - $ref: '#/components/parameters/Version'
      responses:
        '200':
          $ref: '#/components/responses/Statistics'
        '400':
          $ref: '#/components/responses/BadRequest'
        '404':
          $ref: '#/components/responses/NotFound'
  /v2/repository/index:
    post:
      operationId: repositoryIndex
      tags: [repository]
      summary: List the models and versions in the repository
      security:
        - {}
        - bearerAuth: []
      requestBody:
        required: false
        content:
          application/json:
            schema:
              $ref: '#/components/schemas/RepositoryIndexRequest'
      parameters:
        - $ref: '#/components/parameters/Traceparent'
      responses:
        '200':
          description: One entry per model version found.
          headers:
            traceparent:
              $ref: '#/components/headers/Traceparent'
          content:
            application/json:
              schema:
                type: array
                items:
                  $ref: '#/components/schemas/RepositoryIndexEntry'
        '400':
          $ref: '#/components/responses/BadRequest'
        '401':
          $ref: '#/components/responses/Unauthorized'
        '403':
          $ref: '#/components/responses/Forbidden'
  /v2/repository/models/{model}/load:
    post:
      operationId: repositoryModelLoad
      tags: [repository]
      summary: Load (or reload) a model's versions from the repository
      description: |
        New versions are compiled before they are published; requests in flight keep the version they started on.
        A READY version is never dropped before its replacement is READY: when no version on disk loads (all failed,
        or their directories are gone) the load answers an error (400 or 409) and what serves keeps serving.
      security:
        - {}
        - bearerAuth: []
      parameters:
        - $ref: '#/components/parameters/Traceparent'
        - $ref: '#/components/parameters/Model'
      requestBody:
        required: false
        description: Triton's load-with-config; `config` (config.json as a string) replaces the model's config.json first.
        content:
          application/json:
            schema:
              type: object
              properties:
                parameters:
                  type: object
                  properties:
                    config:
                      type: string
      responses:
        '200':
          description: Loaded (empty body).
          headers:
            traceparent:
              $ref: '#/components/headers/Traceparent'
        '400':
          $ref: '#/components/responses/BadRequest'
        '401':
          $ref: '#/components/responses/Unauthorized'
        '403':
          $ref: '#/components/responses/Forbidden'
        '404':
          $ref: '#/components/responses/NotFound'
        '409':
          $ref: '#/components/responses/Conflict'
        '503':
          $ref: '#/components/responses/Unavailable'
        '507':
          $ref: '#/components/responses/InsufficientStorage'
  /v2/repository/models/{model}/unload:
    post:
      operationId: repositoryModelUnload
      tags: [repository]
      summary: Unload a model
      description: New requests get 404 at once; requests in flight complete.
      security:
        - {}
        - bearerAuth: []
      parameters:
        - $ref: '#/components/parameters/Traceparent'
        - $ref: '#/components/parameters/Model'
      responses:
        '200':
          description: Unloaded (empty body).
          headers:
            traceparent:
              $ref: '#/components/headers/Traceparent'
        '400':
          $ref: '#/components/responses/BadRequest'
        '401':
          $ref: '#/components/responses/Unauthorized'
        '403':
          $ref: '#/components/responses/Forbidden'
        '404':
          $ref: '#/components/responses/NotFound'
  /v2/repository/models/{model}/versions/{version}:
    put:
      operationId: repositoryVersionUpload
      tags: [repository]
      summary: Upload an ONNX model as a new version
      description: |
        A transaction: the body is written under `<repository>/.staging/`, compiled and run once there, and only when it
        is READY renamed into place as `<repository>/<model>/<version>/model.onnx` and published (per the version policy).
        A version that fails (400), or does not fit `--max-model-memory` (507), is removed and never reaches the
        repository; the served versions keep serving. A version already on disk answers 409 unless `replace=true`,
        which keeps the old file serving until the new one is READY. A read-only repository answers 403, a full one 507.
        An optional `Digest: sha-256=<base64>` header is checked against the body before anything is stored.
      security:
        - {}
        - bearerAuth: []
      parameters:
        - $ref: '#/components/parameters/Traceparent'
        - $ref: '#/components/parameters/Model'
        - $ref: '#/components/parameters/Version'
        - name: Digest
          in: header
          required: false
          description: RFC 3230 digest of the body, `sha-256=<base64 of the SHA-256>`.
          schema:
            type: string
            pattern: '^sha-256=[A-Za-z0-9+/]{43}=$'
        - name: replace
          in: query
          required: false
          description: Replace the version when it already exists (the old file serves until the new one is READY).
          schema:
            type: boolean
            default: false
      requestBody:
        required: true
        content:
          application/octet-stream:
            schema:
              type: string
              format: binary
              description: A serialized ONNX ModelProto.
      responses:
        '201':
          description: Stored, compiled and published.
          headers:
            traceparent:
              $ref: '#/components/headers/Traceparent'
          content:
            application/json:
              schema:
                $ref: '#/components/schemas/UploadedVersion'
        '400':
          $ref: '#/components/responses/BadRequest'
        '401':
          $ref: '#/components/responses/Unauthorized'
        '403':
          $ref: '#/components/responses/Forbidden'
        '409':
          $ref: '#/components/responses/Conflict'
        '413':
          $ref: '#/components/responses/PayloadTooLarge'
        '415':
          $ref: '#/components/responses/UnsupportedMediaType'
        '507':
          $ref: '#/components/responses/InsufficientStorage'
  /v2/repository/models/{model}/default:
    post:
      operationId: repositorySetDefault
      tags: [repository]
      summary: Pin the version unversioned routes use
      security:
        - {}
        - bearerAuth: []
      parameters:
        - $ref: '#/components/parameters/Traceparent'
        - $ref: '#/components/parameters/Model'
      requestBody:
        required: true
        content:
          application/json:
            schema:
              $ref: '#/components/schemas/DefaultVersionRequest'
      responses:
        '200':
          description: The new default.
          headers:
            traceparent:
              $ref: '#/components/headers/Traceparent'
          content:
            application/json:
              schema:
                $ref: '#/components/schemas/DefaultVersion'
        '400':
          $ref: '#/components/responses/BadRequest'
        '401':
          $ref: '#/components/responses/Unauthorized'
        '403':
          $ref: '#/components/responses/Forbidden'
        '404':
          $ref: '#/components/responses/NotFound'
        '415':
          $ref: '#/components/responses/UnsupportedMediaType'
    delete:
      operationId: repositoryClearDefault
      tags: [repository]
      summary: Unpin the default version (the highest loaded version becomes the default)
      security:
        - {}
        - bearerAuth: []
      parameters:
        - $ref: '#/components/parameters/Traceparent'
        - $ref: '#/components/parameters/Model'
      responses:
        '200':
          description: The default now in effect.
          headers:
            traceparent:
              $ref: '#/components/headers/Traceparent'
          content:
            application/json:
              schema:
                $ref: '#/components/schemas/DefaultVersion'
        '400':
          $ref: '#/components/responses/BadRequest'
        '401':
          $ref: '#/components/responses/Unauthorized'
        '403':
          $ref: '#/components/responses/Forbidden'
        '404':
          $ref: '#/components/responses/NotFound'
  /metrics:
    get:
      operationId: metrics
      tags: [observability]
      summary: Prometheus metrics
      parameters:
        - $ref: '#/components/parameters/Traceparent'
      responses:
        '200':
          description: Prometheus text exposition format.
          headers:
            traceparent:
              $ref: '#/components/headers/Traceparent'
          content:
            text/plain; version=0.0.4:
              schema:
                type: string
components:
  securitySchemes:
    bearerAuth:
      type: http
      scheme: bearer
      description: Optional; when the server is started with an admin token, repository routes require it.
  parameters:
    Traceparent:
      name: traceparent
      in: header
      required: false
      description: |
        W3C Trace Context of the caller's span. A valid value continues its trace (same trace id in the response's
        `traceparent` and in the access log); an invalid one is ignored and a new trace is started, as the spec says.
      schema:
        type: string
        example: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01
    Model:
      name: model
      in: path
      required: true
      description: Model name.
      schema:
        type: string
        pattern: '^[A-Za-z0-9_.-]{1,64}$'
        not:
          enum: ['.', '..']
    Version:
      name: version
      in: path
      required: true
      description: Model version, a positive integer.
      schema:
        type: string
        pattern: '^[1-9][0-9]{0,17}$'
    TopK:
      name: top_k
      in: query
      required: false
      description: Number of classes to return per image.
      schema:
        type: integer
        minimum: 1
        maximum: 1000
        default: 5
    InferenceHeaderContentLength:
      name: Inference-Header-Content-Length
      in: header
      required: false
      description: |
        Binary tensor data extension: the body's first N bytes are the JSON request and the rest are the inputs'
        binary data, concatenated in input order, each `parameters.binary_data_size` bytes.
      schema:
        type: integer
        minimum: 0
  headers:
    Traceparent:
      description: |
        W3C Trace Context (https://www.w3.org/TR/trace-context/): `00-<trace-id>-<span-id>-<flags>` naming the
        server's span of the request's trace; the trace id is the request's (continued from a valid `traceparent`
        request header, else new) and is logged as `trace_id` on the request's access line.
      schema:
        type: string
        pattern: '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$'
    Allow:
      description: Methods the path accepts.
      schema:
        type: string
    RetryAfter:
      description: Seconds after which the client may retry.
      schema:
        type: integer
        minimum: 0
    InferenceHeaderContentLength:
      description: Length of the JSON part of a binary-extension response.
      schema:
        type: integer
        minimum: 0
  requestBodies:
    Inference:
      required: true
      content:
        application/json:
          schema:
            $ref: '#/components/schemas/InferenceRequest'
        application/octet-stream:
          schema:
            type: string
            format: binary
            description: |
              Binary tensor data extension: `Inference-Header-Content-Length` bytes of JSON (an InferenceRequest whose
              binary inputs carry `parameters.binary_data_size` instead of `data`), followed by the raw little-endian
              tensor bytes in input order. BOOL is one byte (0/1); BYTES elements are a 4-byte little-endian length
              followed by the bytes.
    Image:
      required: true
      content:
        image/png:
          schema:
            type: string
            format: binary
        image/jpeg:
          schema:
            type: string
            format: binary
        multipart/form-data:
          schema:
            type: object
            description: One or more image file parts (any field name); each part must be image/png or image/jpeg.
            properties:
              image:
                type: string
                format: binary
              top_k:
                type: integer
                minimum: 1
                maximum: 1000
          encoding:
            image:
              contentType: image/png, image/jpeg
  responses:
    Inference:
      description: |
        Inference result. `application/json` when every output is JSON; `application/octet-stream` with
        `Inference-Header-Content-Length` when any output was requested as binary (`binary_data` on the output
        or `binary_data_output` on the request), the binary outputs following the JSON in output order.
      headers:
        traceparent:
          $ref: '#/components/headers/Traceparent'
        Inference-Header-Content-Length:
          $ref: '#/components/headers/InferenceHeaderContentLength'
      content:
        application/json:
          schema:
            $ref: '#/components/schemas/InferenceResponse'
        application/octet-stream:
          schema:
            type: string
            format: binary
    Classify:
      description: Top classes per image, highest score first.
      headers:
        traceparent:
          $ref: '#/components/headers/Traceparent'
      content:
        application/json:
          schema:
            $ref: '#/components/schemas/ClassifyResponse'
    Statistics:
      description: Per-version request and timing statistics.
      headers:
        traceparent:
          $ref: '#/components/headers/Traceparent'
      content:
        application/json:
          schema:
            $ref: '#/components/schemas/ModelStatistics'
    BadRequest:
      description: The request is malformed (body, parameters, shapes, datatypes); the message says what was expected.
      headers:
        traceparent:
          $ref: '#/components/headers/Traceparent'
      content:
        application/json:
          schema:
            $ref: '#/components/schemas/Error'
    Unauthorized:
      description: Missing or invalid bearer token.
      headers:
        traceparent:
          $ref: '#/components/headers/Traceparent'
        WWW-Authenticate:
          schema:
            type: string
      content:
        application/json:
          schema:
            $ref: '#/components/schemas/Error'
    Forbidden:
      description: Not allowed (a non-loopback client while no admin token is set), or the model repository is read-only.
      headers:
        traceparent:
          $ref: '#/components/headers/Traceparent'
      content:
        application/json:
          schema:
            $ref: '#/components/schemas/Error'
    NotFound:
      description: Unknown path, model or version.
      headers:
        traceparent:
          $ref: '#/components/headers/Traceparent'
      content:
        application/json:
          schema:
            $ref: '#/components/schemas/Error'
    MethodNotAllowed:
      description: The path exists but not with this method.
      headers:
        traceparent:
          $ref: '#/components/headers/Traceparent'
        Allow:
          $ref: '#/components/headers/Allow'
      content:
        application/json:
          schema:
            $ref: '#/components/schemas/Error'
    Conflict:
      description: The version already exists (upload without `replace=true`), or a load found no version on disk.
      headers:
        traceparent:
          $ref: '#/components/headers/Traceparent'
      content:
        application/json:
          schema:
            $ref: '#/components/schemas/Error'
    InsufficientStorage:
      description: |
        Nothing was stored or loaded: the repository's file system is full, or the version would take the loaded
        versions past `--max-model-memory` (the message names the bytes needed, loaded and allowed).
      headers:
        traceparent:
          $ref: '#/components/headers/Traceparent'
      content:
        application/json:
          schema:
            $ref: '#/components/schemas/Error'
    PayloadTooLarge:
      description: |
        The body exceeds `--max-body-bytes`, or the request exceeds a per-request limit: BYTES elements
        (`--max-bytes-elements`), decoded tensor bytes (`--max-decoded-bytes`), image pixels or decoded image bytes
        (`--max-image-pixels`, `--max-image-bytes`), multipart parts. The message names the limit and the count.
      headers:
        traceparent:
          $ref: '#/components/headers/Traceparent'
      content:
        application/json:
          schema:
            $ref: '#/components/schemas/Error'
    UnsupportedMediaType:
      description: |
        The Content-Type (or Content-Encoding) is not accepted by this operation; on classify, also a body or
        multipart part that is not PNG or JPEG (a GIF part answers 415 like a GIF body).
      headers:
        traceparent:
          $ref: '#/components/headers/Traceparent'
      content:
        application/json:
          schema:
            $ref: '#/components/schemas/Error'
    TooManyRequests:
      description: The model's queue is full.
      headers:
        traceparent:
          $ref: '#/components/headers/Traceparent'
        Retry-After:
          $ref: '#/components/headers/RetryAfter'
      content:
        application/json:
          schema:
            $ref: '#/components/schemas/Error'
    Unavailable:
      description: Not ready (starting, loading, draining).
      headers:
        traceparent:
          $ref: '#/components/headers/Traceparent'
        Retry-After:
          $ref: '#/components/headers/RetryAfter'
      content:
        application/json:
          schema:
            $ref: '#/components/schemas/Error'
    Timeout:
      description: The request waited longer than its deadline.
      headers:
        traceparent:
          $ref: '#/components/headers/Traceparent'
      content:
        application/json:
          schema:
            $ref: '#/components/schemas/Error'
    InternalError:
      description: An unexpected failure; the message carries the request id, which is also logged.
      headers:
        traceparent:
          $ref: '#/components/headers/Traceparent'
      content:
        application/json:
          schema:
            $ref: '#/components/schemas/Error'
  schemas:
    ModelList:
      type: object
      required: [models]
      properties:
        models:
          type: array
          items:
            type: object
            required: [name, default_version, pinned, versions]
            properties:
              name:
                type: string
              default_version:
                type: [string, 'null']
                description: The version unversioned routes use; null when none is READY.
              pinned:
                type: boolean
              versions:
                type: array
                items:
                  type: object
                  required: [version, state]
                  properties:
                    version:
                      type: string
                    state:
                      type: string
                      enum: [LOADING, READY, UNAVAILABLE, FAILED]
    Error:
      type: object
      required: [error]
      properties:
        error:
          type: string
      additionalProperties: false
    Datatype:
      type: string
      enum: [BOOL, UINT8, UINT16, UINT32, UINT64, INT8, INT16, INT32, INT64, FP16, BF16, FP32, FP64, BYTES]
    Parameters:
      type: object
      additionalProperties:
        type: [string, number, integer, boolean]
    ServerMetadata:
      type: object
      required: [name, version, extensions]
      properties:
        name:
          type: string
        version:
          type: string
        extensions:
          type: array
          items:
            type: string
          examples:
            - [binary_tensor_data, classification, model_repository, statistics]
    TensorMetadata:
      type: object
      required: [name, datatype, shape]
      properties:
        name:
          type: string
        datatype:
          $ref: '#/components/schemas/Datatype'
        shape:
          type: array
          description: Dimensions; -1 marks a dynamic dimension.
          items:
            type: integer
            minimum: -1
    ModelConfig:
      type: object
      description: Triton-style configuration; dims exclude the batch dimension when max_batch_size > 0, -1 is dynamic.
      required: [name, platform, max_batch_size, input, output]
      properties:
        name:
          type: string
        platform:
          type: string
        backend:
          type: string
        max_batch_size:
          type: integer
        input:
          type: array
          items:
            $ref: '#/components/schemas/ModelConfigTensor'
        output:
          type: array
          items:
            $ref: '#/components/schemas/ModelConfigTensor'
        dynamic_batching:
          type: object
          properties:
            max_queue_delay_microseconds:
              type: integer
            preferred_batch_size:
              type: array
              items:
                type: integer
            max_queue_size:
              type: integer
            default_timeout_microseconds:
              type: integer
        version_policy:
          type: object
        image:
          type: object
          description: The effective image preprocessing, for models with an image input.
    ModelConfigTensor:
      type: object
      required: [name, data_type, dims]
      properties:
        name:
          type: string
        data_type:
          type: string
          description: Triton type name, e.g. TYPE_FP32.
        dims:
          type: array
          items:
            type: integer
    ModelMetadata:
      type: object
      required: [name, platform, inputs, outputs]
      properties:
        name:
          type: string
        versions:
          type: array
          items:
            type: string
        platform:
          type: string
          const: onnx
        inputs:
          type: array
          items:
            $ref: '#/components/schemas/TensorMetadata'
        outputs:
          type: array
          items:
            $ref: '#/components/schemas/TensorMetadata'
    TensorData:
      type: array
      description: Elements in row-major order, flat or nested to any depth; numbers, booleans (BOOL) or strings (BYTES).
      items:
        oneOf:
          - type: number
          - type: boolean
          - type: string
          - $ref: '#/components/schemas/TensorData'
    RequestInput:
      type: object
      required: [name, shape, datatype]
      properties:
        name:
          type: string
        shape:
          type: array
          items:
            type: integer
            minimum: 0
        datatype:
          $ref: '#/components/schemas/Datatype'
        parameters:
          type: object
          properties:
            binary_data_size:
              type: integer
              minimum: 0
              description: Size of this input's binary data after the JSON (binary extension); then `data` is absent.
          additionalProperties: true
        data:
          $ref: '#/components/schemas/TensorData'
    RequestOutput:
      type: object
      required: [name]
      properties:
        name:
          type: string
        parameters:
          type: object
          properties:
            binary_data:
              type: boolean
              description: Return this output as binary data after the JSON.
            classification:
              type: integer
              minimum: 1
              description: Return the top N classes as BYTES strings `value:index[:label]`, shape [batch, N].
          additionalProperties: true
    InferenceRequest:
      type: object
      required: [inputs]
      properties:
        id:
          type: string
        parameters:
          type: object
          properties:
            binary_data_output:
              type: boolean
              description: Default for every output's `binary_data`.
            timeout:
              type: integer
              minimum: 1
              description: Longest time, in microseconds, the request may wait in the model's queue (504 after).
          additionalProperties: true
        inputs:
          type: array
          minItems: 1
          items:
            $ref: '#/components/schemas/RequestInput'
        outputs:
          type: array
          description: Outputs to return; all model outputs when absent.
          items:
            $ref: '#/components/schemas/RequestOutput'
    ResponseOutput:
      type: object
      required: [name, shape, datatype]
      properties:
        name:
          type: string
        shape:
          type: array
          items:
            type: integer
            minimum: 0
        datatype:
          $ref: '#/components/schemas/Datatype'
        parameters:
          type: object
          properties:
            binary_data_size:
              type: integer
              minimum: 0
          additionalProperties: true
        data:
          type: array
          description: Flat row-major elements; non-finite floats are null.
          items:
            type: [number, boolean, string, 'null']
    InferenceResponse:
      type: object
      required: [model_name, outputs]
      properties:
        model_name:
          type: string
        model_version:
          type: string
        id:
          type: string
        parameters:
          $ref: '#/components/schemas/Parameters'
        outputs:
          type: array
          items:
            $ref: '#/components/schemas/ResponseOutput'
    Classification:
      type: object
      required: [index, label, score]
      properties:
        index:
          type: integer
          minimum: 0
        label:
          type: [string, 'null']
        score:
          type: [number, 'null']
    ClassifyResponse:
      type: object
      required: [model_name, model_version, classifications]
      properties:
        model_name:
          type: string
        model_version:
          type: string
        classifications:
          type: array
          description: One list per image, in request order.
          items:
            type: array
            items:
              $ref: '#/components/schemas/Classification'
    DurationStat:
      type: object
      required: [count, ns]
      properties:
        count:
          type: integer
        ns:
          type: integer
          description: Total nanoseconds over `count` events.
    ModelStatistics:
      type: object
      required: [model_stats]
      properties:
        model_stats:
          type: array
          items:
            type: object
            required: [name, version, inference_count, execution_count]
            properties:
              name:
                type: string
              version:
                type: string
              last_inference:
                type: integer
                description: Milliseconds since the Unix epoch.
              inference_count:
                type: integer
              execution_count:
                type: integer
              inference_stats:
                type: object
                properties:
                  success:
                    $ref: '#/components/schemas/DurationStat'
                  fail:
                    $ref: '#/components/schemas/DurationStat'
                  queue:
                    $ref: '#/components/schemas/DurationStat'
                  compute_input:
                    $ref: '#/components/schemas/DurationStat'
                  compute_infer:
                    $ref: '#/components/schemas/DurationStat'
                  compute_output:
                    $ref: '#/components/schemas/DurationStat'
              batch_stats:
                type: array
                items:
                  type: object
                  properties:
                    batch_size:
                      type: integer
                    compute_infer:
                      $ref: '#/components/schemas/DurationStat'
    RepositoryIndexRequest:
      type: object
      properties:
        ready:
          type: boolean
          description: Only list versions that are ready.
    RepositoryIndexEntry:
      type: object
      required: [name, state]
      properties:
        name:
          type: string
        version:
          type: string
        state:
          type: string
          enum: [UNAVAILABLE, LOADING, READY, FAILED]
        reason:
          type: string
        memory_bytes:
          type: integer
          minimum: 0
          description: Loaded versions only; weights and packed constants plus activations at the maximum batch size.
    Liveness:
      type: object
      required: [live]
      properties:
        live:
          type: boolean
    Readiness:
      type: object
      required: [ready]
      properties:
        ready:
          type: boolean
    ModelReadiness:
      type: object
      required: [name, ready]
      properties:
        name:
          type: string
        ready:
          type: boolean
    UploadedVersion:
      type: object
      required: [name, version, sha256]
      properties:
        name:
          type: string
        version:
          type: string
        sha256:
          type: string
          description: Hex SHA-256 of the stored model.
    DefaultVersionRequest:
      type: object
      required: [version]
      properties:
        version:
          type: string
          pattern: '^[1-9][0-9]{0,17}$'
    DefaultVersion:
      type: object
      required: [name, default_version, pinned]
      properties:
        name:
          type: string
        default_version:
          type: [string, 'null']
        pinned:
          type: boolean

"""##
}
