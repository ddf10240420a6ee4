# tests/fakes/aws/sigv4.py - AWS Signature Version 4, checked the way AWS checks it, for the
# fake AWS service (fake_aws.py): the Authorization header parsed, the canonical request rebuilt
# from what arrived, the string to sign and the signing key derived, the signature compared;
# the request's time held to the server's clock (5 minutes either way), the credential scope to
# the server's region and to the service the request is for, the security token of temporary
# credentials to the one issued with them. Python standard library only.
#
# Every refusal is a SigV4Error with a kind (the same kind answers as JSON for SSM and as XML
# for STS: fake_aws.py's AUTH_ERRORS maps it to each protocol's status and code) and AWS's own
# message.
import datetime
import hashlib
import hmac
import re
import urllib.parse

ALGORITHM = "AWS4-HMAC-SHA256"
MAX_SKEW_S = 300  # AWS refuses a request signed more than 5 minutes away from its clock
AMZ_DATE = re.compile(r"^\d{8}T\d{6}Z$")
UNRESERVED = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~"
BAD_SIGNATURE = ("The request signature we calculated does not match the signature you provided. "
                 "Check your AWS Secret Access Key and signing method. Consult the service "
                 "documentation for details.")


class SigV4Error(Exception):
    """A refused request. kind: missing (no Authorization at all), incomplete (a malformed one),
    signature (a signature, date or scope that does not hold), unknown_key, expired_token."""

    def __init__(self, kind, message):
        super().__init__(message)
        self.kind = kind
        self.message = message


def uri_encode(s, keep=""):
    """RFC 3986 percent-encoding of everything but the unreserved characters (and keep)."""
    return urllib.parse.quote(s, safe=UNRESERVED + keep)


def canonical_uri(raw_path):
    """The canonical URI of a service other than S3: the path as it travelled (already
    percent-encoded once), normalized (empty, '.' and '..' segments resolved), and each segment
    percent-encoded once more."""
    segments = []
    for seg in raw_path.split("/"):
        if seg in ("", "."):
            continue
        if seg == "..":
            if segments:
                segments.pop()
            continue
        segments.append(seg)
    path = "/" + "/".join(uri_encode(s) for s in segments)
    if raw_path.endswith("/") and segments:
        path += "/"
    return path


def canonical_query(raw_query):
    """Every name=value pair, decoded then encoded the SigV4 way (space as %20), sorted by name
    then value."""
    pairs = []
    for part in raw_query.split("&") if raw_query else []:
        if not part:
            continue
        name, _, value = part.partition("=")
        name = urllib.parse.unquote_plus(name)
        value = urllib.parse.unquote_plus(value)
        pairs.append((uri_encode(name), uri_encode(value)))
    return "&".join(f"{n}={v}" for n, v in sorted(pairs))


def header_value(headers, name):
    """All the values of a header (case-insensitive), joined with ',', each trimmed and its runs
    of spaces collapsed, as the canonical headers have them; None when absent."""
    values = headers.get_all(name) if hasattr(headers, "get_all") else (
        [v for k, v in headers.items() if k.lower() == name])
    if not values:
        return None
    return ",".join(re.sub(r"\s+", " ", v.strip()) for v in values)


def signing_key(secret, date, region, service):
    k = hmac.new(("AWS4" + secret).encode(), date.encode(), hashlib.sha256).digest()
    for part in (region, service, "aws4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    return k


def parse_authorization(value):
    """{credential, signed_headers, signature} of an Authorization header, or SigV4Error."""
    algorithm, _, rest = value.strip().partition(" ")
    if algorithm != ALGORITHM:
        raise SigV4Error("incomplete", f"Unsupported AWS 'algorithm': '{algorithm}'")
    fields = {}
    for part in rest.split(","):
        k, eq, v = part.strip().partition("=")
        if eq:
            fields[k.strip()] = v.strip()
    missing = [k for k in ("Credential", "Signature", "SignedHeaders") if not fields.get(k)]
    if missing:
        raise SigV4Error("incomplete", " ".join(
            f"Authorization header requires '{k}' parameter." for k in missing)
            + f" Authorization={value}")
    scope = fields["Credential"].split("/")
    if len(scope) != 5:
        raise SigV4Error("incomplete", f"Credential must have exactly 5 slash-delimited elements, "
                                       f"e.g. keyid/date/region/service/term, got '{fields['Credential']}'")
    return {"key_id": scope[0], "date": scope[1], "region": scope[2], "service": scope[3],
            "terminator": scope[4], "signed_headers": fields["SignedHeaders"].split(";"),
            "signature": fields["Signature"], "credential": fields["Credential"]}


def amz_time(text):
    return datetime.datetime.strptime(text, "%Y%m%dT%H%M%SZ").replace(tzinfo=datetime.timezone.utc)


def fmt_amz(ts):
    return datetime.datetime.fromtimestamp(ts, datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def verify(method, raw_path, raw_query, headers, body, *, region, service, now, lookup):
    """Checks a signed request; returns (auth, credential) or raises SigV4Error.

    raw_path, raw_query: as they travelled on the request line; headers: the request's headers
    (an email.message.Message, names case-insensitive); body: bytes; region, service: what the
    request must be scoped to; now: the server's clock (epoch seconds); lookup(key_id): the
    credential of that key (an object with .secret, .token, .expired(now)) or None."""
    value = headers.get("Authorization")
    if value is None:
        if "X-Amz-Signature" in urllib.parse.parse_qs(raw_query):
            raise SigV4Error("incomplete", "Presigned (query string) requests are not supported "
                                           "by this fake: sign the Authorization header")
        raise SigV4Error("missing", "Missing Authentication Token")
    auth = parse_authorization(value)
    signed = auth["signed_headers"]
    if "host" not in signed and ":authority" not in signed:
        raise SigV4Error("incomplete", "'Host' or ':authority' must be a 'SignedHeader' in the AWS "
                                       f"Authorization. Authorization={value}")
    amz_date = headers.get("X-Amz-Date")
    if amz_date is None:
        raise SigV4Error("incomplete", "Authorization header requires existence of either a "
                                       f"'X-Amz-Date' or a 'Date' header. Authorization={value}")
    if "x-amz-date" not in signed:
        raise SigV4Error("incomplete", "'X-Amz-Date' must be a 'SignedHeader' in the AWS "
                                       f"Authorization. Authorization={value}")
    if not AMZ_DATE.match(amz_date.strip()):
        raise SigV4Error("incomplete", f"Date must be in ISO-8601 'basic format'. Got '{amz_date}'. "
                                       "See http://en.wikipedia.org/wiki/ISO_8601")
    amz_date = amz_date.strip()
    request_time = amz_time(amz_date).timestamp()
    if request_time < now - MAX_SKEW_S:
        raise SigV4Error("signature", f"Signature expired: {amz_date} is now earlier than "
                                      f"{fmt_amz(now - MAX_SKEW_S)} ({fmt_amz(now)} - 5 min.)")
    if request_time > now + MAX_SKEW_S:
        raise SigV4Error("signature", f"Signature not yet current: {amz_date} is still later than "
                                      f"{fmt_amz(now + MAX_SKEW_S)} ({fmt_amz(now)} + 5 min.)")
    if auth["terminator"] != "aws4_request":
        raise SigV4Error("signature", "Credential should be scoped with a valid terminator: "
                                      f"'aws4_request', not '{auth['terminator']}'. ")
    if auth["date"] != amz_date[:8]:
        raise SigV4Error("signature", "Date in Credential scope does not match YYYYMMDD from ISO-8601 "
                                      f"version of date from HTTP: '{auth['date']}' != "
                                      f"'{amz_date[:8]}', from '{amz_date}'.")
    if auth["region"] != region:
        raise SigV4Error("signature", "Credential should be scoped to a valid region, "
                                      f"not '{auth['region']}'. ")
    if auth["service"] != service:
        raise SigV4Error("signature", f"Credential should be scoped to correct service: '{service}'. ")
    cred = lookup(auth["key_id"])
    if cred is None:
        raise SigV4Error("unknown_key", "The security token included in the request is invalid.")
    token = headers.get("X-Amz-Security-Token")
    if cred.token is not None:
        if token is None or not hmac.compare_digest(token.strip().encode(), cred.token.encode()) \
                or "x-amz-security-token" not in signed:
            raise SigV4Error("unknown_key", "The security token included in the request is invalid.")
        if cred.expired(now):
            raise SigV4Error("expired_token", "The security token included in the request is expired")
    elif token is not None:
        raise SigV4Error("unknown_key", "The security token included in the request is invalid.")

    payload_hash = hashlib.sha256(body).hexdigest()
    claimed = headers.get("X-Amz-Content-Sha256")
    if claimed is not None and claimed.strip() != payload_hash:
        raise SigV4Error("signature", "The provided 'x-amz-content-sha256' header does not match "
                                      "what was computed.")
    lines = []
    for name in signed:
        v = header_value(headers, name)
        lines.append(f"{name}:{'' if v is None else v}\n")
    canonical = "\n".join([method, canonical_uri(raw_path), canonical_query(raw_query),
                           "".join(lines), ";".join(signed), payload_hash])
    scope = f"{auth['date']}/{auth['region']}/{auth['service']}/aws4_request"
    to_sign = "\n".join([ALGORITHM, amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    expected = hmac.new(signing_key(cred.secret, auth["date"], auth["region"], auth["service"]),
                        to_sign.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected.encode(), auth["signature"].lower().encode()):
        raise SigV4Error("signature", f"{BAD_SIGNATURE}\n\nThe Canonical String for this request "
                                      f"should have been\n'{canonical}'\n\nThe String-to-Sign should "
                                      f"have been\n'{to_sign}'\n")
    return auth, cred
