# tests/fakes/aws/protocol.py - the two wire protocols the fake AWS service (fake_aws.py)
# speaks, and the errors of both: AWS JSON 1.1 (SSM: X-Amz-Target, application/x-amz-json-1.1,
# errors {"__type", "message"} with x-amzn-ErrorType) and the AWS query protocol (STS: a form
# body Action=...&Version=2011-06-15, answers in XML in STS's namespace, errors in an
# ErrorResponse). Python standard library only.
from xml.sax.saxutils import escape

JSON_CONTENT_TYPE = "application/x-amz-json-1.1"
XML_CONTENT_TYPE = "text/xml"
STS_NAMESPACE = "https://sts.amazonaws.com/doc/2011-06-15/"
STS_VERSION = "2011-06-15"
# The namespace of the errors the request front end (coral) raises for every JSON service,
# before the service sees the request; the service's own errors carry no namespace.
CORAL = "com.amazon.coral.service"
CORAL_VALIDATE = "com.amazon.coral.validate"


class ApiError(Exception):
    """An error answer. code: the error's name (SSM: __type; STS: Code); namespace: for the
    front end's errors (UnrecognizedClientException, ...), written as namespace#Code in __type;
    message: None when AWS sends none (many of SSM's own errors); member: the JSON member the
    message travels in ("message" for the front end's errors, "Message" for SSM's modelled
    ones); sender: STS's Type (Sender or Receiver)."""

    def __init__(self, status, code, message=None, *, namespace=None, member="message", sender=True):
        super().__init__(f"{code}: {message}")
        self.status, self.code, self.message = status, code, message
        self.namespace, self.member, self.sender = namespace, member, sender


def validation(field, value, constraint):
    """The front end's validation error, for a JSON service (ValidationException) or STS
    (ValidationError): '1 validation error detected: Value 'x' at 'field' failed to satisfy
    constraint: Member must ...'."""
    return f"1 validation error detected: Value '{value}' at '{field}' failed to satisfy constraint: {constraint}"


# ---- JSON 1.1 --------------------------------------------------------------------

def json_error(err):
    """(body dict, x-amzn-ErrorType header) of an error, as SSM answers it."""
    qualified = f"{err.namespace}#{err.code}" if err.namespace else err.code
    body = {"__type": qualified}
    if err.message is not None:
        body[err.member] = err.message
    ns = err.namespace or "com.amazonaws.ssm"
    return body, f"{err.code}:http://internal.amazon.com/coral/{ns}/"


# ---- query protocol / XML --------------------------------------------------------

def xml_value(v, indent):
    pad = "  " * indent
    if isinstance(v, dict):
        inner = "".join(f"{pad}  <{k}>{xml_value(x, indent + 1)}</{k}>\n" for k, x in v.items()
                        if x is not None)
        return "\n" + inner + pad
    if isinstance(v, bool):
        return "true" if v else "false"
    return escape(str(v))


def xml_response(action, result, request_id):
    """<ActionResponse xmlns=STS><ActionResult>...</ActionResult><ResponseMetadata>...</...>"""
    body = xml_value(result, 1) if result else ""
    return (f'<{action}Response xmlns="{STS_NAMESPACE}">\n'
            f"  <{action}Result>{body}</{action}Result>\n"
            f"  <ResponseMetadata>\n    <RequestId>{request_id}</RequestId>\n  </ResponseMetadata>\n"
            f"</{action}Response>\n")


def xml_error(err, request_id):
    message = "" if err.message is None else escape(err.message)
    return (f'<ErrorResponse xmlns="{STS_NAMESPACE}">\n'
            f"  <Error>\n    <Type>{'Sender' if err.sender else 'Receiver'}</Type>\n"
            f"    <Code>{err.code}</Code>\n    <Message>{message}</Message>\n  </Error>\n"
            f"  <RequestId>{request_id}</RequestId>\n</ErrorResponse>\n")
