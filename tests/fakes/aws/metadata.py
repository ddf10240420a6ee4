# tests/fakes/aws/metadata.py - the two credential endpoints of the fake AWS service
# (fake_aws.py) that are not signed: the EC2 instance metadata service, IMDSv2 (a session token
# from PUT /latest/api/token, then GETs under /latest/ that carry it; the instance profile's
# credentials, the region, the identity document), and the ECS container credentials endpoint
# (GET /_ecs/credentials, the URL of AWS_CONTAINER_CREDENTIALS_FULL_URI, with the
# AWS_CONTAINER_AUTHORIZATION_TOKEN it is started with). The credentials both hand out are
# issued by creds.Store, and sign SSM and STS requests until they expire. Python standard
# library only.
import hmac
import json
import secrets
import threading
import time

from creds import iso8601

NOT_FOUND_HTML = """<?xml version="1.0" encoding="iso-8859-1"?>
<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Transitional//EN"
\t"http://www.w3.org/TR/xhtml1/DTD/xhtml1-transitional.dtd">
<html xmlns="http://www.w3.org/1999/xhtml" xml:lang="en" lang="en">
 <head>
  <title>{status} - {reason}</title>
 </head>
 <body>
  <h1>{status} - {reason}</h1>
 </body>
</html>
"""
META_DATA = ["ami-id", "ami-launch-index", "hostname", "iam/", "instance-id", "instance-type",
             "local-ipv4", "placement/", "services/"]


def page(status, reason):
    return status, "text/html", NOT_FOUND_HTML.format(status=status, reason=reason), []


class Lease:
    """Credentials handed out again and again, and issued anew when close to their end (as IMDS
    and ECS rotate them well before they expire)."""

    def __init__(self, store, cred_seconds, role_arn, session, kind):
        self.store, self.cred_seconds = store, cred_seconds
        self.role_arn, self.session, self.kind = role_arn, session, kind
        self.cred = None
        self.lock = threading.Lock()

    def get(self, now):
        with self.lock:
            margin = min(300, self.cred_seconds / 2)
            if self.cred is None or self.cred.expiration - now <= margin:
                self.cred = self.store.issue(kind=self.kind, role_arn=self.role_arn, session=self.session,
                                             now=now, seconds=self.cred_seconds, source=self.kind)
            return self.cred


class Metadata:
    def __init__(self, *, store, region, account, instance_id, role, cred_seconds, allow_v1,
                 ecs_auth_token, clock):
        self.region, self.account, self.instance_id, self.role = region, account, instance_id, role
        self.allow_v1, self.ecs_auth_token, self.clock = allow_v1, ecs_auth_token, clock
        self.tokens = {}  # IMDS session token -> its end (time.monotonic())
        self.lock = threading.Lock()
        self.imds_lease = Lease(store, cred_seconds, f"arn:aws:iam::{account}:role/{role}", instance_id, "imds")
        self.ecs_lease = Lease(store, cred_seconds, f"arn:aws:iam::{account}:role/aks-fake-task-role",
                               "aks-fake-task", "ecs")

    # ---- IMDSv2 ----------------------------------------------------------------------------

    def imds(self, method, path, headers):
        """(status, content type, body, headers) of a request under /latest/."""
        if path == "/latest/api/token":
            if method != "PUT":
                return page(405, "Method Not Allowed")
            if headers.get("X-Forwarded-For") is not None:
                return page(403, "Forbidden")
            ttl = headers.get("X-aws-ec2-metadata-token-ttl-seconds")
            if ttl is None or not ttl.strip().isdigit() or not 1 <= int(ttl) <= 21600:
                return page(400, "Bad Request")
            token = secrets.token_urlsafe(40)
            with self.lock:
                now = time.monotonic()
                self.tokens = {t: end for t, end in self.tokens.items() if end > now}
                self.tokens[token] = now + int(ttl)
            return 200, "text/plain", token, [("X-aws-ec2-metadata-token-ttl-seconds", ttl.strip())]
        if method != "GET":
            return page(405, "Method Not Allowed")
        token = headers.get("X-aws-ec2-metadata-token")
        if token is None and not self.allow_v1:
            return page(401, "Unauthorized")
        if token is not None:
            with self.lock:
                end = self.tokens.get(token)
            if end is None or end <= time.monotonic():
                return page(401, "Unauthorized")
        return self.imds_get(path)

    def imds_get(self, path):
        now = self.clock()
        text = lambda body: (200, "text/plain", body, [])  # noqa: E731
        doc = lambda obj: (200, "text/plain", json.dumps(obj, indent=2), [])  # noqa: E731
        ip = "172.31.0.10"
        if path in ("/latest/meta-data", "/latest/meta-data/"):
            return text("\n".join(META_DATA))
        if path == "/latest/meta-data/instance-id":
            return text(self.instance_id)
        if path == "/latest/meta-data/instance-type":
            return text("t3.micro")
        if path == "/latest/meta-data/ami-id":
            return text("ami-0123456789abcdef0")
        if path == "/latest/meta-data/local-ipv4":
            return text(ip)
        if path == "/latest/meta-data/hostname":
            return text(f"ip-{ip.replace('.', '-')}.ec2.internal")
        if path in ("/latest/meta-data/placement", "/latest/meta-data/placement/"):
            return text("availability-zone\navailability-zone-id\nregion")
        if path == "/latest/meta-data/placement/region":
            return text(self.region)
        if path == "/latest/meta-data/placement/availability-zone":
            return text(self.region + "a")
        if path in ("/latest/meta-data/iam", "/latest/meta-data/iam/"):
            return text("info\nsecurity-credentials/")
        if path == "/latest/meta-data/iam/info":
            return doc({"Code": "Success", "LastUpdated": iso8601(now),
                        "InstanceProfileArn": f"arn:aws:iam::{self.account}:instance-profile/{self.role}",
                        "InstanceProfileId": "AIPA" + "FAKEINSTANCEPROFILE"[:17]})
        if path in ("/latest/meta-data/iam/security-credentials", "/latest/meta-data/iam/security-credentials/"):
            return text(self.role)
        if path == f"/latest/meta-data/iam/security-credentials/{self.role}":
            cred = self.imds_lease.get(now)
            return doc({"Code": "Success", "LastUpdated": iso8601(cred.issued), "Type": "AWS-HMAC",
                        "AccessKeyId": cred.key_id, "SecretAccessKey": cred.secret, "Token": cred.token,
                        "Expiration": iso8601(cred.expiration)})
        if path == "/latest/dynamic/instance-identity/document":
            return doc({"accountId": self.account, "architecture": "x86_64",
                        "availabilityZone": self.region + "a", "billingProducts": None,
                        "devpayProductCodes": None, "marketplaceProductCodes": None,
                        "imageId": "ami-0123456789abcdef0", "instanceId": self.instance_id,
                        "instanceType": "t3.micro", "kernelId": None, "pendingTime": iso8601(now - 3600),
                        "privateIp": ip, "ramdiskId": None, "region": self.region, "version": "2017-09-30"})
        return page(404, "Not Found")

    # ---- ECS --------------------------------------------------------------------------------

    def ecs(self, method, headers):
        if method != "GET":
            return 405, "application/json", json.dumps({"code": "MethodNotAllowed"}), []
        if self.ecs_auth_token is not None:
            given = headers.get("Authorization")
            if given is None or not hmac.compare_digest(given.encode(), self.ecs_auth_token.encode()):
                return 401, "application/json", json.dumps(
                    {"code": "AccessDeniedException", "message": "Unauthorized"}), []
        cred = self.ecs_lease.get(self.clock())
        return 200, "application/json", json.dumps(
            {"RoleArn": self.ecs_lease.role_arn, "AccessKeyId": cred.key_id,
             "SecretAccessKey": cred.secret, "Token": cred.token,
             "Expiration": iso8601(cred.expiration), "AccountId": self.account}), []
