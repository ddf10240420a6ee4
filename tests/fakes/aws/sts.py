# tests/fakes/aws/sts.py - the STS actions of the fake AWS service (fake_aws.py), in the query
# protocol (form parameters in, XML out): GetCallerIdentity, AssumeRole and
# AssumeRoleWithWebIdentity (the one STS action AWS takes unsigned), validated as STS validates
# them, issuing temporary credentials from creds.Store. Python standard library only.
import base64
import json
import re

from creds import iso8601
from protocol import ApiError, validation

ROLE_ARN = re.compile(r"^arn:aws:iam::\d{12}:role/[\w+=,.@/-]+$")
SESSION_NAME = re.compile(r"^[\w+=,.@-]*$")
MAX_SESSION_DURATION = 3600  # an IAM role's MaxSessionDuration unless raised (AWS's default)
UNSIGNED_ACTIONS = {"AssumeRoleWithWebIdentity"}


def bad(message):
    return ApiError(400, "ValidationError", message)


def role_params(params):
    """RoleArn and RoleSessionName, checked as STS checks them."""
    arn, name = params.get("RoleArn"), params.get("RoleSessionName")
    if arn is None:
        raise bad(validation("roleArn", "null", "Member must not be null").replace("'null'", "null"))
    if len(arn) < 20:
        raise bad(validation("roleArn", arn, "Member must have length greater than or equal to 20"))
    if name is None:
        raise bad(validation("roleSessionName", "null", "Member must not be null").replace("'null'", "null"))
    if len(name) < 2:
        raise bad(validation("roleSessionName", name, "Member must have length greater than or equal to 2"))
    if len(name) > 64:
        raise bad(validation("roleSessionName", name, "Member must have length less than or equal to 64"))
    if not SESSION_NAME.match(name):
        raise bad(validation("roleSessionName", name,
                             "Member must satisfy regular expression pattern: [\\w+=,.@-]*"))
    if not ROLE_ARN.match(arn):
        raise bad("Request ARN is invalid")
    return arn, name


def duration(params, cred_seconds):
    """DurationSeconds (900..43200, at most the role's MaxSessionDuration; default 3600), and
    the lifetime the fake gives the credentials: that, but no more than --cred-seconds."""
    text = params.get("DurationSeconds")
    if text is None:
        seconds = 3600
    else:
        try:
            seconds = int(text)
        except ValueError:
            raise bad(f"Value '{text}' for parameter DurationSeconds is invalid. "
                      "Must be an integer value") from None
        if seconds < 900:
            raise bad(validation("durationSeconds", seconds, "Member must have value greater than or equal to 900"))
        if seconds > 43200:
            raise bad(validation("durationSeconds", seconds, "Member must have value less than or equal to 43200"))
        if seconds > MAX_SESSION_DURATION:
            raise bad("The requested DurationSeconds exceeds the MaxSessionDuration set for this role.")
    return min(seconds, cred_seconds)


def credentials_xml(cred):
    return {"AccessKeyId": cred.key_id, "SecretAccessKey": cred.secret, "SessionToken": cred.token,
            "Expiration": iso8601(cred.expiration)}


def jwt_claims(token):
    """The claims of a JWT (unverified), {} when the token is not one."""
    parts = token.split(".")
    if len(parts) != 3:
        return {}
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except ValueError:
        return {}
    return claims if isinstance(claims, dict) else {}


class Sts:
    def __init__(self, store, cred_seconds, web_identity_token):
        self.store, self.cred_seconds, self.web_identity_token = store, cred_seconds, web_identity_token

    def call(self, action, params, caller, now):
        """The <ActionResult> contents (a dict) of ACTION, or ApiError. caller: the signing
        Credential (None for an unsigned action)."""
        fn = {"GetCallerIdentity": self.get_caller_identity, "AssumeRole": self.assume_role,
              "AssumeRoleWithWebIdentity": self.assume_role_with_web_identity}.get(action)
        if fn is None:
            raise ApiError(400, "InvalidAction", f"Could not find operation {action} for version 2011-06-15")
        return fn(params, caller, now)

    def get_caller_identity(self, params, caller, now):
        return {"Arn": caller.arn, "UserId": caller.user_id, "Account": caller.account}

    def assume_role(self, params, caller, now):
        arn, name = role_params(params)
        seconds = duration(params, self.cred_seconds)
        cred = self.store.issue(kind="sts:AssumeRole", role_arn=arn, session=name, now=now,
                                seconds=seconds, source=caller.key_id)
        return {"AssumedRoleUser": {"AssumedRoleId": cred.user_id, "Arn": cred.arn},
                "Credentials": credentials_xml(cred)}

    def assume_role_with_web_identity(self, params, caller, now):
        arn, name = role_params(params)
        token = params.get("WebIdentityToken")
        if token is None:
            raise bad(validation("webIdentityToken", "null", "Member must not be null").replace("'null'", "null"))
        if len(token) < 4:
            raise bad(validation("webIdentityToken", "***", "Member must have length greater than or equal to 4"))
        seconds = duration(params, self.cred_seconds)
        if self.web_identity_token is not None and token != self.web_identity_token:
            raise ApiError(400, "InvalidIdentityToken",
                           "The web identity token that was passed could not be validated by AWS. "
                           "Get a new identity token from the identity provider and then retry the request.")
        claims = jwt_claims(token)
        cred = self.store.issue(kind="sts:AssumeRoleWithWebIdentity", role_arn=arn, session=name,
                                now=now, seconds=seconds, source="web-identity")
        issuer = str(claims.get("iss", "https://oidc.aksandbox.test")).removeprefix("https://")
        aud = claims.get("aud", "sts.amazonaws.com")
        return {"Audience": aud[0] if isinstance(aud, list) and aud else aud,
                "AssumedRoleUser": {"AssumedRoleId": cred.user_id, "Arn": cred.arn},
                "Provider": issuer, "Credentials": credentials_xml(cred),
                "SubjectFromWebIdentityToken": str(claims.get("sub", "aks-fake-subject"))}
