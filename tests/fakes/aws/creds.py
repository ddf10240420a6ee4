# tests/fakes/aws/creds.py - the credentials the fake AWS service (fake_aws.py) knows: the
# long-term key pairs it is started with (--credentials), and the temporary ones it issues
# (STS AssumeRole and AssumeRoleWithWebIdentity, the instance metadata service, the ECS
# container endpoint), each with the identity GetCallerIdentity answers for it. Every one is
# good for signing SSM and STS requests until it expires. Python standard library only.
import datetime
import hashlib
import json
import secrets
import string
import threading

UPPER_DIGITS = string.ascii_uppercase + string.digits
SECRET_CHARS = string.ascii_letters + string.digits + "+/"


def iso8601(ts):
    """A time as STS, IMDS and ECS write an expiration: 2024-01-02T03:04:05Z."""
    return datetime.datetime.fromtimestamp(ts, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def unique_id(prefix, seed):
    """An IAM unique id (AIDA... for a user, AROA... for a role): the prefix and 17 characters."""
    digest = hashlib.sha256(seed.encode()).digest()
    return prefix + "".join(UPPER_DIGITS[b % len(UPPER_DIGITS)] for b in digest[:17])


class Credential:
    def __init__(self, key_id, secret, *, token=None, expiration=None, kind="long-term",
                 arn, user_id, account, issued=None, source=None):
        self.key_id, self.secret, self.token, self.expiration = key_id, secret, token, expiration
        self.kind, self.arn, self.user_id, self.account = kind, arn, user_id, account
        self.issued, self.source = issued, source

    def expired(self, now):
        return self.expiration is not None and now >= self.expiration

    def public(self, now):
        """What /_fake/credentials shows: no secret, no token."""
        return {"access_key_id": self.key_id, "kind": self.kind, "arn": self.arn,
                "user_id": self.user_id, "account": self.account, "source": self.source,
                "issued": iso8601(self.issued) if self.issued else None,
                "expiration": iso8601(self.expiration) if self.expiration else None,
                "expired": self.expired(now)}


class Store:
    def __init__(self, account):
        self.account = account
        self.lock = threading.Lock()
        self.by_key = {}
        self.issued = []  # in the order issued

    def load(self, path):
        """The --credentials file: a JSON list of {access_key_id, secret_access_key} (optional:
        account, user)."""
        with open(path) as f:
            entries = json.load(f)
        if not isinstance(entries, list):
            raise ValueError(f"{path}: not a JSON list")
        for e in entries:
            key, secret = e.get("access_key_id"), e.get("secret_access_key")
            if not isinstance(key, str) or not isinstance(secret, str) or not key or not secret:
                raise ValueError(f"{path}: every entry needs access_key_id and secret_access_key")
            account = str(e.get("account", self.account))
            user = e.get("user", "aks-fake-user")
            self.by_key[key] = Credential(key, secret, arn=f"arn:aws:iam::{account}:user/{user}",
                                          user_id=unique_id("AIDA", key), account=account)

    def lookup(self, key_id):
        with self.lock:
            return self.by_key.get(key_id)

    def issue(self, *, kind, role_arn, session, now, seconds, source=None):
        """New temporary credentials for ROLE_ARN's session SESSION, valid for SECONDS from NOW:
        an ASIA... key, a 40-character secret, a session token."""
        account = role_arn.split(":")[4]
        role_path = role_arn.split(":", 5)[5][len("role/"):]
        role_name = role_path.rsplit("/", 1)[-1]
        role_id = unique_id("AROA", role_arn)
        cred = Credential(
            "ASIA" + "".join(secrets.choice(UPPER_DIGITS) for _ in range(16)),
            "".join(secrets.choice(SECRET_CHARS) for _ in range(40)),
            token="IQoJb3JpZ2luX2VjE" + secrets.token_urlsafe(240).replace("-", "+").replace("_", "/"),
            expiration=int(now) + int(seconds), kind=kind,
            arn=f"arn:aws:sts::{account}:assumed-role/{role_name}/{session}",
            user_id=f"{role_id}:{session}", account=account, issued=now, source=source)
        with self.lock:
            self.by_key[cred.key_id] = cred
            self.issued.append(cred)
        return cred

    def expire(self, key_id, now):
        with self.lock:
            cred = self.by_key.get(key_id)
            if cred is None or cred.token is None:
                return False
            cred.expiration = int(now)
            return True

    def list_issued(self, now):
        with self.lock:
            return [c.public(now) for c in self.issued]
