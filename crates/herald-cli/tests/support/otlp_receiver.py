"""A real OTLP/HTTP trace receiver for herald's trace tests, built on the official
protobuf definitions (PyPI's opentelemetry-proto).

    otlp_receiver.py

Listens on 127.0.0.1, port chosen by the OS, and prints that port on stdout (one line).
Accepts POST /v1/traces with an ExportTraceServiceRequest in protobuf (what herald's
exporter sends), answers an empty ExportTraceServiceResponse, and prints every span it
decoded as one JSON line on stdout: its name, kind, trace and span ids, parent span id
(hex; "" for a root), service name, status code and message, and attributes (values as
strings). Anything else is a 404 / 400. Runs until stdin closes or it is killed.
"""

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

OUT = threading.Lock()


def value_text(value) -> str:
    kind = value.WhichOneof("value")
    return "" if kind is None else str(getattr(value, kind))


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        if self.path != "/v1/traces":
            self.send_error(404)
            return
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        request = ExportTraceServiceRequest()
        try:
            request.ParseFromString(body)
        except Exception:  # a body that is not the message: the client's fault
            self.send_error(400)
            return
        lines = []
        for resource_spans in request.resource_spans:
            service = ""
            for attr in resource_spans.resource.attributes:
                if attr.key == "service.name":
                    service = value_text(attr.value)
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    lines.append(
                        {
                            "name": span.name,
                            "kind": span.kind,
                            "trace_id": span.trace_id.hex(),
                            "span_id": span.span_id.hex(),
                            "parent_span_id": span.parent_span_id.hex(),
                            "service": service,
                            "status_code": span.status.code,
                            "status_message": span.status.message,
                            "attributes": {
                                a.key: value_text(a.value) for a in span.attributes
                            },
                        }
                    )
        with OUT:
            for line in lines:
                sys.stdout.write(json.dumps(line) + "\n")
            sys.stdout.flush()
        answer = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args) -> None:
        pass


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sys.stdin.read()


if __name__ == "__main__":
    main()
