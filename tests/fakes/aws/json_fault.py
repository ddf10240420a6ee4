#!/usr/bin/env python3
# tests/fakes/aws/json_fault.py SERVICE MODE PORT_FILE LOG - an endpoint of an AWS JSON protocol
# service (SERVICE: dynamodb or sqs) that fails every request the way the service does, for
# the plugins' error tests (dynamodb-errors.test, sqs-errors.test: the emulators they run
# against, dynalite and fauxqs, accept any signature and never throttle). It listens on a free
# loopback port, writes the port to PORT_FILE, and appends one line per request to LOG: the
# X-Amz-Target and whether the request was signed for SERVICE (an Authorization header with
# its SigV4 credential scope). MODE:
#   auth      400 UnrecognizedClientException (the credentials are not valid)
#   expired   400 ExpiredTokenException (a session token that ran out)
#   throttle  400, the service's throttling error (every time)
#   hang      reads the request and never answers
import http.server
import json
import os
import sys
import time

service, mode, port_file, log = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
# each service's error namespace (the __type prefix its JSON errors carry) and throttling error
namespace = {"dynamodb": "com.amazonaws.dynamodb.v20120810#", "sqs": "com.amazonaws.sqs#"}[service]
throttle = {
    "dynamodb": ("ProvisionedThroughputExceededException",
                 "The level of configured provisioned throughput for the table was exceeded."),
    "sqs": ("RequestThrottled", "Request is throttled."),
}[service]
faults = {
    "auth": ("UnrecognizedClientException", "The security token included in the request is invalid."),
    "expired": ("ExpiredTokenException", "The security token included in the request is expired"),
    "throttle": throttle,
}


class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        auth = self.headers.get("Authorization", "")
        with open(log, "a") as f:
            f.write("%s signed=%s bytes=%d\n" % (self.headers.get("X-Amz-Target", "-"),
                                                 "/%s/aws4_request" % service in auth,
                                                 len(body)))
        if mode == "hang":
            time.sleep(60)
            return
        code, message = faults[mode]
        out = json.dumps({"__type": namespace + code,
                          "message": message}).encode()
        self.send_response(400)
        self.send_header("Content-Type", "application/x-amz-json-1.0")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
with open(port_file + ".tmp", "w") as f:
    f.write("%d\n" % server.server_address[1])
os.rename(port_file + ".tmp", port_file)
server.serve_forever()
