# tests/fakes/aws/ssm.py - the Systems Manager (SSM) actions of the fake AWS service
# (fake_aws.py), AWS JSON 1.1 bodies in and out: DescribeInstanceInformation, SendCommand,
# GetCommandInvocation, CancelCommand. Commands really run: AWS-RunShellScript's commands,
# joined with newlines into _script.sh, run by `sh -c SCRIPT` in a process group of their own
# (as the SSM agent runs them), as the fake's user, in the invocation's orchestration directory
# under the instance's tree in --state, with the agent's environment variables; stdout and
# stderr go to files there. Their timeout (executionTimeout) is enforced, a cancel kills their
# process group, and the invocation's status, exit code and output are what the agent reports.
# Python standard library only.
import base64
import datetime
import hashlib
import json
import os
import re
import signal
import subprocess
import threading
import time
import uuid

from protocol import ApiError, CORAL_VALIDATE, validation

INSTANCE_ID = re.compile(r"^(i-(\w{8}|\w{17})|mi-\w{17})$")
DOCUMENT = "AWS-RunShellScript"
PLUGIN = "aws:runShellScript"
DOCUMENT_PARAMETERS = {"commands", "workingDirectory", "executionTimeout"}
EXECUTION_TIMEOUT = re.compile(r"^(([1-9][0-9]{0,4})|(1[0-6][0-9]{4})|(17[0-1][0-9]{3})|(172[0-7][0-9]{2})|(172800))$")
DEFAULT_EXECUTION_TIMEOUT = 3600
STDOUT_MAX, STDERR_MAX = 24000, 8000  # the first characters GetCommandInvocation returns
STOPPED_EXIT_CODE = 137  # the agent's CommandStoppedPreemptivelyExitCode on Linux
FILTER_KEYS = {"InstanceIds", "AgentVersion", "PingStatus", "PlatformTypes", "ActivationIds",
               "IamRole", "ResourceType", "AssociationStatus"}
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
FINAL = {"Success", "Failed", "TimedOut", "Cancelled"}
# Go's syscall.Signal.String(): how the agent words a command killed by a signal.
GO_SIGNALS = {1: "hangup", 2: "interrupt", 3: "quit", 6: "aborted", 9: "killed",
              11: "segmentation fault", 13: "broken pipe", 14: "alarm clock", 15: "terminated"}


def validation_error(field, value, constraint):
    return ApiError(400, "ValidationException", validation(field, value, constraint),
                    namespace=CORAL_VALIDATE)


def not_null(body, field, member):
    if body.get(member) is None:
        raise ApiError(400, "ValidationException",
                       f"1 validation error detected: Value null at '{field}' failed to satisfy "
                       "constraint: Member must not be null", namespace=CORAL_VALIDATE)
    return body[member]


def iso_ms(ts):
    """ExecutionStartDateTime's format: 2019-02-14T19:26:26.439Z."""
    dt = datetime.datetime.fromtimestamp(ts, datetime.timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


def copy(pipe, path):
    """A command's output, from its pipe to its file, until every writer has closed it."""
    with pipe, open(path, "wb") as f:
        while True:
            data = pipe.read1(65536)
            if not data:
                return
            f.write(data)
            f.flush()


def group_alive(pgid):
    """Whether a process of group PGID is still running (zombies do not count)."""
    if not pgid:
        return False
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            return True
    return False


class Instance:
    def __init__(self, iid, info=None):
        info = info or {}
        self.id = iid
        digest = hashlib.sha256(iid.encode()).digest()
        ip = f"172.31.{digest[0]}.{digest[1] or 1}"
        self.registered = time.time()
        self.info = {"PingStatus": "Online", "AgentVersion": "3.3.1611.0", "IsLatestVersion": False,
                     "PlatformType": "Linux", "PlatformName": "Amazon Linux", "PlatformVersion": "2023",
                     "ResourceType": "EC2Instance", "IPAddress": ip,
                     "ComputerName": f"ip-{ip.replace('.', '-')}.ec2.internal",
                     "SourceId": iid, "SourceType": "AWS::EC2::Instance"}
        self.info.update({k: v for k, v in info.items() if k != "InstanceId"})

    @property
    def online(self):
        return self.info.get("PingStatus") == "Online"

    def describe(self, now):
        d = {"InstanceId": self.id}
        d.update(self.info)
        d["LastPingDateTime"] = round(now if self.online else self.registered, 3)
        return d


class Invocation:
    def __init__(self, command, instance_id, root):
        self.command, self.instance_id = command, instance_id
        self.dir = os.path.join(root, instance_id, "document", "orchestration", command.id,
                                "awsrunShellScript", "0.awsrunShellScript")
        self.script = os.path.join(self.dir, "_script.sh")
        self.status, self.details, self.response_code = "Pending", "Pending", -1
        self.start = self.end = None
        self.proc = None
        self.cancelled = threading.Event()
        self.done = threading.Event()
        self.stderr_extra = ""

    @property
    def pgid(self):
        return self.proc.pid if self.proc else None

    def output(self, name, limit):
        if self.status not in FINAL:
            return ""
        try:
            with open(os.path.join(self.dir, name), "rb") as f:
                text = f.read().decode("utf-8", errors="replace")
        except OSError:
            text = ""
        if name == "stderr" and self.stderr_extra:
            text += ("" if text.endswith("\n") or not text else "\n") + self.stderr_extra
        return text[:limit]


class Command:
    def __init__(self, body, instance_ids, params, timeout_s, exec_timeout, now):
        self.id = str(uuid.uuid4())
        self.body, self.instance_ids, self.params = body, instance_ids, params
        self.timeout_s, self.exec_timeout = timeout_s, exec_timeout
        self.requested, self.requested_mono = now, time.monotonic()
        self.invocations = {}

    def describe(self, region):
        b = self.body
        statuses = [i.status for i in self.invocations.values()]
        status = "InProgress" if any(s == "InProgress" for s in statuses) else (
            "Pending" if any(s == "Pending" for s in statuses) else (statuses[0] if statuses else "Pending"))
        return {
            "CommandId": self.id, "DocumentName": b["DocumentName"],
            "DocumentVersion": b.get("DocumentVersion", "$DEFAULT"), "Comment": b.get("Comment", ""),
            "ExpiresAfter": round(self.requested + self.timeout_s + self.exec_timeout, 3),
            "Parameters": self.params, "InstanceIds": list(self.instance_ids),
            "Targets": b.get("Targets", []), "RequestedDateTime": round(self.requested, 3),
            "Status": status, "StatusDetails": status, "OutputS3Region": region,
            "OutputS3BucketName": b.get("OutputS3BucketName", ""),
            "OutputS3KeyPrefix": b.get("OutputS3KeyPrefix", ""),
            "MaxConcurrency": b.get("MaxConcurrency", "50"), "MaxErrors": b.get("MaxErrors", "0"),
            "TargetCount": len(self.instance_ids),
            "CompletedCount": sum(s in FINAL for s in statuses),
            "ErrorCount": sum(s in ("Failed", "TimedOut") for s in statuses),
            "DeliveryTimedOutCount": sum(i.details == "DeliveryTimedOut" for i in self.invocations.values()),
            "ServiceRole": b.get("ServiceRoleArn", ""),
            "NotificationConfig": {"NotificationArn": "", "NotificationEvents": [], "NotificationType": ""},
            "CloudWatchOutputConfig": {"CloudWatchLogGroupName": "", "CloudWatchOutputEnabled": False},
            "TimeoutSeconds": self.timeout_s}


class Ssm:
    def __init__(self, *, region, state, clock, invocation_delay_s, delivery_delay_s, instances):
        self.region, self.clock = region, clock
        self.root = os.path.join(state, "instances")
        self.pgid_file = os.path.join(state, "pgids")
        self.invocation_delay_s, self.delivery_delay_s = invocation_delay_s, delivery_delay_s
        self.lock = threading.Lock()
        self.instances = {}
        self.commands = {}
        self.closing = False
        for iid in instances:
            self.register(iid)

    # ---- the instances (also the tests' door: /_fake/instances) ----------------------

    def register(self, iid, info=None):
        if not INSTANCE_ID.match(iid):
            raise ValueError(f"not an instance id: {iid}")
        with self.lock:
            inst = self.instances.get(iid)
            if inst is None or info is None:
                self.instances[iid] = inst = Instance(iid, info)
            else:
                inst.info.update({k: v for k, v in info.items() if k != "InstanceId"})
        os.makedirs(os.path.join(self.root, iid), exist_ok=True)
        return inst.describe(self.clock())

    def deregister(self, iid):
        with self.lock:
            return self.instances.pop(iid, None) is not None

    def list_instances(self):
        with self.lock:
            return [i.describe(self.clock()) for i in self.instances.values()]

    # ---- the API ------------------------------------------------------------------------

    def call(self, op, body):
        fn = {"DescribeInstanceInformation": self.describe_instance_information,
              "SendCommand": self.send_command, "GetCommandInvocation": self.get_command_invocation,
              "CancelCommand": self.cancel_command}.get(op)
        if fn is None:
            raise ApiError(400, "UnknownOperationException", None, namespace="com.amazon.coral.service")
        if not isinstance(body, dict):
            raise ApiError(400, "SerializationException", None, namespace="com.amazon.coral.service")
        return fn(body)

    def describe_instance_information(self, body):
        conditions = []
        for f in body.get("InstanceInformationFilterList") or []:
            key, values = f.get("key"), f.get("valueSet") or []
            if key not in FILTER_KEYS:
                raise validation_error("instanceInformationFilterList.1.member.key", key,
                                       "Member must satisfy enum value set: [" + ", ".join(sorted(FILTER_KEYS)) + "]")
            conditions.append((key, values))
        for f in body.get("Filters") or []:
            key, values = f.get("Key"), f.get("Values") or []
            if key not in FILTER_KEYS and not (isinstance(key, str) and (key == "tag-key" or key.startswith("tag:"))):
                raise ApiError(400, "InvalidFilterKey")
            conditions.append((key, values))
        for key, values in conditions:
            if key == "InstanceIds":
                for v in values:
                    if not isinstance(v, str) or not INSTANCE_ID.match(v):
                        raise ApiError(400, "InvalidInstanceId", None, member="Message")
        max_results = body.get("MaxResults", 50)
        if not isinstance(max_results, int) or not 5 <= max_results <= 50:
            raise validation_error("maxResults", max_results, "Member must have value greater than or equal to 5"
                                   if isinstance(max_results, int) and max_results < 5 else
                                   "Member must have value less than or equal to 50")
        start = 0
        if body.get("NextToken"):
            try:
                start = json.loads(base64.b64decode(body["NextToken"]))["offset"]
            except (ValueError, KeyError, TypeError):
                raise ApiError(400, "InvalidNextToken", "The specified token isn't valid.", member="Message") from None
        attr = {"AgentVersion": "AgentVersion", "PingStatus": "PingStatus", "PlatformTypes": "PlatformType",
                "ResourceType": "ResourceType", "IamRole": "IamRole", "AssociationStatus": "AssociationStatus"}
        now = self.clock()
        with self.lock:
            found = []
            for inst in self.instances.values():
                d = inst.describe(now)
                ok = True
                for key, values in conditions:
                    have = d["InstanceId"] if key == "InstanceIds" else d.get(attr.get(key, "-"))
                    ok = ok and have in values
                if ok:
                    found.append(d)
        page = found[start:start + max_results]
        out = {"InstanceInformationList": page}
        if start + max_results < len(found):
            out["NextToken"] = base64.b64encode(json.dumps({"offset": start + max_results}).encode()).decode()
        return out

    def send_command(self, body):
        name = not_null(body, "documentName", "DocumentName")
        ids = body.get("InstanceIds")
        targets = body.get("Targets")
        if ids is None and targets:
            ids = [v for t in targets if t.get("Key") == "InstanceIds" for v in t.get("Values", [])]
        if not isinstance(ids, list) or not ids:
            raise ApiError(400, "InvalidInstanceId", None, member="Message")
        for i in ids:
            if not isinstance(i, str) or not INSTANCE_ID.match(i):
                raise validation_error("instanceIds", f"[{', '.join(map(str, ids))}]",
                                       "Member must satisfy constraint: [Member must satisfy regular expression "
                                       "pattern: (^i-(\\w{8}|\\w{17})$)|(^mi-\\w{17}$)]")
        if len(ids) > 50:
            raise validation_error("instanceIds", f"[{', '.join(ids)}]", "Member must have length less than or equal to 50")
        timeout_s = body.get("TimeoutSeconds", 3600)
        if not isinstance(timeout_s, int) or not 30 <= timeout_s <= 2592000:
            raise validation_error("timeoutSeconds", timeout_s, "Member must have value greater than or equal to 30"
                                   if isinstance(timeout_s, int) and timeout_s < 30 else
                                   "Member must have value less than or equal to 2592000")
        if len(body.get("Comment") or "") > 100:
            raise validation_error("comment", body["Comment"], "Member must have length less than or equal to 100")
        if name not in (DOCUMENT, f"arn:aws:ssm:{self.region}::document/{DOCUMENT}"):
            raise ApiError(400, "InvalidDocument", f"Document with name {name} does not exist.", member="Message")
        if body.get("DocumentVersion") not in (None, "$DEFAULT", "$LATEST", "1"):
            raise ApiError(400, "InvalidDocumentVersion", f"Document with name {name} and version "
                           f"{body['DocumentVersion']} does not exist.", member="Message")
        params = body.get("Parameters") or {}
        if not isinstance(params, dict) or not all(
                isinstance(v, list) and all(isinstance(s, str) for s in v) for v in params.values()):
            raise ApiError(400, "SerializationException", None, namespace="com.amazon.coral.service")
        for p in params:
            if p not in DOCUMENT_PARAMETERS:
                raise ApiError(400, "InvalidParameters", f"Parameter \"{p}\" is not a valid parameter "
                               f"for document {DOCUMENT}.", member="Message")
        if not params.get("commands"):
            raise ApiError(400, "InvalidParameters", "Parameter \"commands\" is required.", member="Message")
        exec_timeout = params.get("executionTimeout", [str(DEFAULT_EXECUTION_TIMEOUT)])
        if len(exec_timeout) != 1 or not EXECUTION_TIMEOUT.match(exec_timeout[0]):
            raise ApiError(400, "InvalidParameters", f"Parameter \"executionTimeout\" has a value "
                           f"\"{','.join(exec_timeout)}\" that does not match the pattern.", member="Message")
        with self.lock:
            for i in ids:
                if i not in self.instances:
                    raise ApiError(400, "InvalidInstanceId", None, member="Message")
            cmd = Command(body, ids, params, timeout_s, int(exec_timeout[0]), self.clock())
            for i in ids:
                cmd.invocations[i] = Invocation(cmd, i, self.root)
            self.commands[cmd.id] = cmd
        for inv in cmd.invocations.values():
            threading.Thread(target=self.run, args=(inv,), daemon=True).start()
        return {"Command": cmd.describe(self.region)}

    def check_command_id(self, body):
        cid = not_null(body, "commandId", "CommandId")
        if not isinstance(cid, str) or len(cid) != 36:
            raise validation_error("commandId", cid, "Member must have length greater than or equal to 36"
                                   if isinstance(cid, str) and len(cid) < 36 else
                                   "Member must have length less than or equal to 36")
        return cid

    def visible(self, cmd):
        return time.monotonic() - cmd.requested_mono >= self.invocation_delay_s

    def get_command_invocation(self, body):
        cid = self.check_command_id(body)
        iid = not_null(body, "instanceId", "InstanceId")
        if not isinstance(iid, str) or not INSTANCE_ID.match(iid):
            raise validation_error("instanceId", iid, "Member must satisfy regular expression pattern: "
                                   "(^i-(\\w{8}|\\w{17})$)|(^mi-\\w{17}$)")
        plugin = body.get("PluginName")
        if plugin is not None and plugin != PLUGIN:
            raise ApiError(400, "InvalidPluginName")
        with self.lock:
            cmd = self.commands.get(cid)
            inv = cmd.invocations.get(iid) if cmd else None
        if inv is None or not self.visible(cmd):
            raise ApiError(400, "InvocationDoesNotExist")
        b = cmd.body
        out = {"CommandId": cid, "InstanceId": iid, "Comment": b.get("Comment", ""),
               "DocumentName": b["DocumentName"], "DocumentVersion": "1", "PluginName": PLUGIN,
               "ResponseCode": inv.response_code,
               "ExecutionStartDateTime": iso_ms(inv.start) if inv.start else "",
               "ExecutionElapsedTime": f"PT{inv.end - inv.start:.3f}S" if inv.start and inv.end else "",
               "ExecutionEndDateTime": iso_ms(inv.end) if inv.end else "",
               "Status": inv.status, "StatusDetails": inv.details,
               "StandardOutputContent": inv.output("stdout", STDOUT_MAX), "StandardOutputUrl": "",
               "StandardErrorContent": inv.output("stderr", STDERR_MAX), "StandardErrorUrl": "",
               "CloudWatchOutputConfig": {"CloudWatchLogGroupName": "", "CloudWatchOutputEnabled": False}}
        return out

    def cancel_command(self, body):
        cid = self.check_command_id(body)
        with self.lock:
            cmd = self.commands.get(cid)
        if cmd is None:
            raise ApiError(400, "InvalidCommandId")
        only = body.get("InstanceIds") or list(cmd.invocations)
        with self.lock:  # the runner starts a process under this lock: it either sees the
            for iid in only:  # cancel and starts nothing, or has started what is killed here
                inv = cmd.invocations.get(iid)
                if inv is None or inv.status in FINAL:
                    continue
                inv.cancelled.set()
                if inv.proc is not None:
                    inv.status = inv.details = "Cancelling"
                    self.kill(inv)
        # the agent answers the cancel within moments: wait for it, so that what follows sees it
        for iid in only:
            inv = cmd.invocations.get(iid)
            if inv is not None:
                inv.done.wait(2)
        return {}

    # ---- running a command ---------------------------------------------------------------

    def kill(self, inv):
        try:
            os.killpg(inv.pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError, TypeError):
            pass

    def finish(self, inv, status, details, code):
        inv.status, inv.details, inv.response_code = status, details, code
        inv.end = self.clock() if inv.start else None
        inv.done.set()

    def run(self, inv):
        cmd = inv.command
        try:
            # delivery: after --delivery-delay-ms, once the instance is online, before TimeoutSeconds
            while True:
                waited = time.monotonic() - cmd.requested_mono
                if inv.cancelled.is_set() or self.closing:
                    return self.finish(inv, "Cancelled", "Cancelled", -1)
                with self.lock:
                    inst = self.instances.get(inv.instance_id)
                if waited >= self.delivery_delay_s and inst is not None and inst.online:
                    break
                if waited >= cmd.timeout_s:
                    return self.finish(inv, "TimedOut", "DeliveryTimedOut", -1)
                inv.cancelled.wait(0.02)
            os.makedirs(inv.dir, exist_ok=True)
            with open(inv.script, "w") as f:
                f.write("\n".join(cmd.params["commands"]))
            os.chmod(inv.script, 0o700)
            wd = (cmd.params.get("workingDirectory") or [""])[0]
            cwd = inv.dir if not wd else (wd if os.path.isabs(wd) else os.path.join(self.root, inv.instance_id, wd))
            inst_info = inst.info
            env = {"PATH": PATH, "AWS_SSM_INSTANCE_ID": inv.instance_id, "AWS_SSM_REGION_NAME": self.region,
                   "AWS_SSM_PLATFORM_NAME": inst_info.get("PlatformName", ""),
                   "AWS_SSM_PLATFORM_VERSION": inst_info.get("PlatformVersion", "")}
            inv.start = self.clock()
            try:
                with self.lock:  # never started after a cancel or close() looked for what to kill
                    if self.closing or inv.cancelled.is_set():
                        inv.start = None
                        return self.finish(inv, "Cancelled", "Cancelled", -1)
                    inv.proc = subprocess.Popen(["sh", "-c", inv.script], cwd=cwd, env=env,
                                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                                stderr=subprocess.PIPE, process_group=0)
                    inv.status = inv.details = "InProgress"
            except OSError as e:
                detail = f"chdir {cwd}: no such file or directory" if not os.path.isdir(cwd) else str(e)
                for name in ("stdout", "stderr"):
                    open(os.path.join(inv.dir, name), "wb").close()
                inv.stderr_extra = f"failed to run commands: {detail}"
                return self.finish(inv, "Failed", "Failed", 1)
            with open(self.pgid_file, "a") as f:
                f.write(f"{inv.pgid}\n")
            # The agent copies the command's output from pipes, and its command is done when the
            # shell has exited AND the pipes are closed: a process left in the background that
            # still holds stdout or stderr keeps the command InProgress (the classic SSM hang).
            readers = [threading.Thread(target=copy, args=(pipe, os.path.join(inv.dir, name)), daemon=True)
                       for pipe, name in ((inv.proc.stdout, "stdout"), (inv.proc.stderr, "stderr"))]
            for t in readers:
                t.start()
            deadline = time.monotonic() + cmd.exec_timeout
            timed_out, killed_at = False, None
            while True:
                rc = inv.proc.poll()
                if rc is not None and not any(t.is_alive() for t in readers):
                    break
                now = time.monotonic()
                if killed_at is None and inv.cancelled.is_set():
                    killed_at = now  # cancel_command() killed the group
                if killed_at is None and now >= deadline:
                    timed_out, killed_at = True, now
                    self.kill(inv)
                if rc is not None and killed_at is not None and now - killed_at > 1:
                    break  # what holds the pipes is out of the group: the agent stops reading too
                readers[0].join(0.02)
            if inv.cancelled.is_set():
                return self.finish(inv, "Cancelled", "Cancelled", -1)
            if timed_out:
                return self.finish(inv, "TimedOut", "ExecutionTimedOut", STOPPED_EXIT_CODE)
            if rc == 0:
                return self.finish(inv, "Success", "Success", 0)
            inv.stderr_extra = (f"failed to run commands: exit status {rc}" if rc > 0 else
                                f"failed to run commands: signal: {GO_SIGNALS.get(-rc, f'signal {-rc}')}")
            return self.finish(inv, "Failed", "Failed", rc if rc > 0 else -1)
        except Exception as e:  # never leave an invocation InProgress for ever
            inv.stderr_extra = f"fake: {e!r}"
            self.finish(inv, "Failed", "Failed", 1)

    # ---- the tests' view, and the end -------------------------------------------------------

    def list_commands(self):
        with self.lock:
            cmds = list(self.commands.values())
        out = []
        for cmd in cmds:
            for inv in cmd.invocations.values():
                out.append({"CommandId": cmd.id, "InstanceId": inv.instance_id,
                            "script": "\n".join(cmd.params["commands"]), "status": inv.status,
                            "status_details": inv.details, "exit_code": inv.response_code,
                            "pid": inv.pgid, "pgid": inv.pgid, "alive": group_alive(inv.pgid),
                            "dir": inv.dir, "execution_timeout": cmd.exec_timeout,
                            "timeout_seconds": cmd.timeout_s})
        return out

    def close(self):
        """Kills every command's process group (finished ones too: what they left running),
        and waits (up to 5 s) until none of their processes is left."""
        with self.lock:
            self.closing = True
            invs = [i for c in self.commands.values() for i in c.invocations.values() if i.proc]
        for inv in invs:
            inv.cancelled.set()
            self.kill(inv)
        end = time.monotonic() + 5
        while time.monotonic() < end and any(group_alive(i.pgid) for i in invs):
            for inv in invs:
                self.kill(inv)
            time.sleep(0.05)
