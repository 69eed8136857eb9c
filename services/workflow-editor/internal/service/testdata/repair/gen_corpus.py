#!/usr/bin/env python3
"""Writes the repair corpus: one JSON file per family of typical agent mistakes.

Each case has setup (ops applied first, cleanly), batch (the mistaken ops) and intended (the
ops that were meant). Run from this directory: python3 gen_corpus.py
"""
import json

def add(bid, typ, params=None):
    op = {"operation_type": "add", "block_id": bid, "type": typ}
    if params is not None:
        op["params"] = params
    return op

def con(a, b, branch=None):
    if a == "check" and branch is None:
        branch = "true"
    op = {"operation_type": "connect", "block_id": a, "target_block_id": b}
    if branch is not None:
        op["branch"] = branch
    return op

def upd(bid, params):
    return {"operation_type": "update", "block_id": bid, "params": params}

START = [add("start", "trigger.manual")]
FETCH = START + [add("fetch", "http.request", {"method": "GET", "url": "https://api.example.com/items"}), con("start", "fetch")]
CHECK = FETCH + [add("check", "condition", {"expression": "steps.fetch.output.status == 200"}), con("fetch", "check")]
URL = "https://api.example.com/items"

families = {}

def case(family, name, setup, batch, intended, via=None):
    c = {"name": name, "setup": setup, "batch": batch, "intended": intended}
    if via:
        c["via"] = via
    families.setdefault(family, []).append(c)

# --- block types named as other tools name them, and misspelt ----------------------------------
good = {
    "http.request": {"method": "GET", "url": URL},
    "condition": {"expression": "input.n > 5"},
    "wait": {"duration": "5m"},
    "log": {"message": "hello"},
    "transform": {"value": {"n": 1}},
    "fail": {"message": "boom"},
}
type_aliases = [
    ("fetch", "http.request"), ("webhook_call", "http.request"), ("http", "http.request"),
    ("request", "http.request"), ("http_request", "http.request"), ("HttpRequest", "http.request"),
    ("api_call", "http.request"), ("rest", "http.request"), ("http.get", "http.request"),
    ("switch", "condition"), ("if", "condition"), ("branch", "condition"), ("if_else", "condition"),
    ("timer", "wait"), ("sleep", "wait"), ("delay", "wait"), ("pause", "wait"),
    ("print", "log"), ("logger", "log"), ("console.log", "log"),
    ("set", "transform"), ("map", "transform"), ("assign", "transform"),
    ("error", "fail"), ("throw", "fail"),
    ("condtion", "condition"), ("http.requst", "http.request"), ("tranform", "transform"), ("Log", "log"),
]
for alias, typ in type_aliases:
    case("type_alias", alias, START, [add("b", alias, good[typ]), con("start", "b", None)],
         [add("b", typ, good[typ]), con("start", "b")])
trigger_aliases = [("cron_trigger", "trigger.schedule"), ("cron", "trigger.schedule"), ("schedule", "trigger.schedule"),
                   ("manual", "trigger.manual"), ("webhook", "trigger.webhook"), ("manual_trigger", "trigger.manual"),
                   ("trigger.manuel", "trigger.manual"), ("webhook_trigger", "trigger.webhook")]
for alias, typ in trigger_aliases:
    case("type_alias", alias, [], [add("t", alias), add("l", "log", {"message": "hi"}), con("t", "l")],
         [add("t", typ), add("l", "log", {"message": "hi"}), con("t", "l")])

# --- params named as other tools name them ----------------------------------------------------
param_aliases = [
    ("condition", {"predicate": "input.n > 5"}, {"expression": "input.n > 5"}),
    ("condition", {"condition": "input.n > 5"}, {"expression": "input.n > 5"}),
    ("condition", {"expr": "input.n > 5"}, {"expression": "input.n > 5"}),
    ("condition", {"if": "input.n > 5"}, {"expression": "input.n > 5"}),
    ("condition", {"expresion": "input.n > 5"}, {"expression": "input.n > 5"}),
    ("log", {"text": "hi"}, {"message": "hi"}),
    ("log", {"msg": "hi"}, {"message": "hi"}),
    ("log", {"content": "hi"}, {"message": "hi"}),
    ("log", {"mesage": "hi"}, {"message": "hi"}),
    ("fail", {"error": "boom"}, {"message": "boom"}),
    ("fail", {"message": "boom", "attempts": 2}, {"message": "boom", "fail_attempts": 2}),
    ("http.request", {"method": "GET", "address": URL}, {"method": "GET", "url": URL}),
    ("http.request", {"method": "GET", "endpoint": URL}, {"method": "GET", "url": URL}),
    ("http.request", {"method": "GET", "uri": URL}, {"method": "GET", "url": URL}),
    ("http.request", {"verb": "GET", "url": URL}, {"method": "GET", "url": URL}),
    ("http.request", {"method": "POST", "url": URL, "data": {"a": 1}}, {"method": "POST", "url": URL, "body": {"a": 1}}),
    ("http.request", {"method": "POST", "url": URL, "payload": {"a": 1}}, {"method": "POST", "url": URL, "body": {"a": 1}}),
    ("http.request", {"method": "POST", "url": URL, "json": {"a": 1}}, {"method": "POST", "url": URL, "body": {"a": 1}}),
    ("http.request", {"method": "GET", "url": URL, "header": {"X-A": "1"}}, {"method": "GET", "url": URL, "headers": {"X-A": "1"}}),
    ("http.request", {"method": "GET", "url": URL, "params": {"q": "x"}}, {"method": "GET", "url": URL, "query": {"q": "x"}}),
    ("http.request", {"method": "GET", "url": URL, "query_params": {"q": "x"}}, {"method": "GET", "url": URL, "query": {"q": "x"}}),
    ("http.request", {"method": "GET", "url": URL, "timeout": 5000}, {"method": "GET", "url": URL, "timeout_ms": 5000}),
    ("http.request", {"method": "GET", "url": URL, "timeoutMs": 5000}, {"method": "GET", "url": URL, "timeout_ms": 5000}),
    ("wait", {"wait_for": "approve"}, {"signal": "approve"}),
    ("wait", {"event": "approve"}, {"signal": "approve"}),
    ("wait", {"signal_name": "approve"}, {"signal": "approve"}),
    ("wait", {"delay": "5m"}, {"duration": "5m"}),
    ("wait", {"sleep": "30s"}, {"duration": "30s"}),
    ("wait", {"for": "1h"}, {"duration": "1h"}),
    ("wait", {"signal": "approve", "timeout_after": "10m"}, {"signal": "approve", "timeout": "10m"}),
    ("wait", {"until_time": "2030-01-01T00:00:00Z"}, {"until": "2030-01-01T00:00:00Z"}),
    ("transform", {"output": {"n": 1}}, {"value": {"n": 1}}),
]
for i, (typ, bad, good_p) in enumerate(param_aliases):
    case("param_alias", f"{typ}-{'-'.join(bad)}", START, [add("b", typ, bad), con("start", "b")],
         [add("b", typ, good_p), con("start", "b")])
case("param_alias", "trigger-schema", [], [add("t", "trigger.manual", {"schema": {"type": "object"}}), add("l", "log", {"message": "x"}), con("t", "l")],
     [add("t", "trigger.manual", {"input_schema": {"type": "object"}}), add("l", "log", {"message": "x"}), con("t", "l")])

# --- durations written for people -------------------------------------------------------------
durations = [
    ("5 minutes", "5m"), ("two hours", "2h"), ("P1D", "24h"), ("PT30S", "30s"), ("30sec", "30s"),
    ("1.5 hours", "1h30m"), ("90 seconds", "1m30s"), ("1 hour 30 minutes", "1h30m"), ("10 mins", "10m"),
    ("2 days", "48h"), ("PT1H30M", "1h30m"), ("500 milliseconds", "500ms"), ("1 minute", "1m"),
    ("one minute", "1m"), ("thirty seconds", "30s"), ("1h 30m", "1h30m"), ("5 min", "5m"), ("3 hrs", "3h"),
    ("1 week", "168h"), ("30S", "30s"), ("an hour", "1h"), ("PT5M", "5m"), ("15 secs", "15s"), ("2h30", None),
]
for bad, good_d in durations:
    if good_d is None:
        # Ambiguous (2h30m or 2h30s?): no one obvious meaning, so this one is not repaired from
        # the reply alone; meant 2h30m.
        good_d = "2h30m"
    case("duration", bad, START, [add("w", "wait", {"duration": bad}), con("start", "w")],
         [add("w", "wait", {"duration": good_d}), con("start", "w")])
for bad, good_d in [("10 minutes", "10m"), ("PT2H", "2h"), ("1 day", "24h")]:
    case("duration", "timeout " + bad, START, [add("w", "wait", {"signal": "go", "timeout": bad}), con("start", "w")],
         [add("w", "wait", {"signal": "go", "timeout": good_d}), con("start", "w")])
case("duration", "update", START + [add("w", "wait", {"duration": "1m"}), con("start", "w")],
     [upd("w", {"duration": "45 seconds"})], [upd("w", {"duration": "45s"})])

# --- values: numbers, enums, shapes ------------------------------------------------------------
vals = [
    ("timeout string", {"method": "GET", "url": URL, "timeout_ms": "2000"}, {"method": "GET", "url": URL, "timeout_ms": 2000}),
    ("timeout seconds", {"method": "GET", "url": URL, "timeout_ms": "30s"}, {"method": "GET", "url": URL, "timeout_ms": 30000}),
    ("timeout ms suffix", {"method": "GET", "url": URL, "timeout_ms": "5000ms"}, {"method": "GET", "url": URL, "timeout_ms": 5000}),
    ("timeout negative", {"method": "GET", "url": URL, "timeout_ms": -5000}, {"method": "GET", "url": URL, "timeout_ms": 5000}),
    ("method lower", {"method": "get", "url": URL}, {"method": "GET", "url": URL}),
    ("method mixed", {"method": "Post", "url": URL}, {"method": "POST", "url": URL}),
    ("method spaced", {"method": " DELETE ", "url": URL}, {"method": "DELETE", "url": URL}),
    ("query number", {"method": "GET", "url": URL, "query": {"page": 2}}, {"method": "GET", "url": URL, "query": {"page": "2"}}),
    ("header number", {"method": "GET", "url": URL, "headers": {"X-Retry": 3}}, {"method": "GET", "url": URL, "headers": {"X-Retry": "3"}}),
    ("header bool", {"method": "GET", "url": URL, "headers": {"X-Debug": True}}, {"method": "GET", "url": URL, "headers": {"X-Debug": "true"}}),
    ("url no scheme", {"method": "GET", "url": "api.example.com/items"}, {"method": "GET", "url": "https://api.example.com/items"}),
    ("headers string", {"method": "GET", "url": URL, "headers": "Accept: application/json"}, {"method": "GET", "url": URL, "headers": {"Accept": "application/json"}}),
    ("timeout float", {"method": "GET", "url": URL, "timeout_ms": 1500.5}, {"method": "GET", "url": URL, "timeout_ms": 1500}),
    ("timeout zero", {"method": "GET", "url": URL, "timeout_ms": 0}, {"method": "GET", "url": URL, "timeout_ms": 1}),
]
for name, bad, good_p in vals:
    case("value", name, START, [add("b", "http.request", bad), con("start", "b")], [add("b", "http.request", good_p), con("start", "b")])
case("value", "fail_attempts string", START, [add("b", "fail", {"message": "x", "fail_attempts": "3"}), con("start", "b")],
     [add("b", "fail", {"message": "x", "fail_attempts": 3}), con("start", "b")])
case("value", "fail_attempts negative", START, [add("b", "fail", {"message": "x", "fail_attempts": -2}), con("start", "b")],
     [add("b", "fail", {"message": "x", "fail_attempts": 2}), con("start", "b")])
case("value", "log message number", START, [add("b", "log", {"message": 42}), con("start", "b")],
     [add("b", "log", {"message": "42"}), con("start", "b")])
case("value", "input_schema string", [], [add("t", "trigger.manual", {"input_schema": "{\"type\":\"object\"}"}), add("l", "log", {"message": "x"}), con("t", "l")],
     [add("t", "trigger.manual", {"input_schema": {"type": "object"}}), add("l", "log", {"message": "x"}), con("t", "l")])
case("value", "update method", FETCH, [upd("fetch", {"method": "post"})], [upd("fetch", {"method": "POST"})])
case("value", "signal number", START, [add("w", "wait", {"signal": 7}), con("start", "w")],
     [add("w", "wait", {"signal": "7"}), con("start", "w")])

# --- expressions with slips from other languages ------------------------------------------------
exprs = [
    ("input.n = 5", "input.n == 5"), ("input.n === 5", "input.n == 5"), ("input.n !== 5", "input.n != 5"),
    ("input.a <> 1", "input.a != 1"), ("input.ok == True", "input.ok == true"), ("input.ok == False", "input.ok == false"),
    ("input.x == None", "input.x == nil"), ("input.x == null", "input.x == nil"), ("input.x === undefined", "input.x == nil"),
    ("input.n > 5 AND input.m < 3", "input.n > 5 and input.m < 3"), ("input.n > 5 OR input.m < 3", "input.n > 5 or input.m < 3"),
    ("NOT input.ok", "not input.ok"), ("input.n > 5 &&", "input.n > 5"), ("input.n > 5 and", "input.n > 5"),
    ("(input.n > 5", "(input.n > 5)"), ("input.n > 5)", "input.n > 5"), ("{{ input.n > 5 }}", "input.n > 5"),
    ("input.x IS NULL", "input.x == nil"), ("input.x IS NOT NULL", "input.x != nil"), ("input.x is None", "input.x == nil"),
    ("input.x is not None", "input.x != nil"), ("input.name.toUpperCase() == \"BOB\"", "upper(input.name) == \"BOB\""),
    ("input.s.startsWith(\"a\")", "input.s startsWith \"a\""), ("input.s == 'a' || input.n = 2", "input.s == 'a' || input.n == 2"),
    ("(input.a > 1) and (input.b < 2", "(input.a > 1) and (input.b < 2)"), ("input.n >= 5 && input.ok === true", "input.n >= 5 && input.ok == true"),
    ("input.name.toLowerCase() == \"bob\"", "lower(input.name) == \"bob\""), ("input.n > ", None),
]
for bad, good_e in exprs:
    if good_e is None:
        good_e = "input.n > 0"  # the operand is missing: no one obvious fix
    case("expression", bad, START, [add("c", "condition", {"expression": bad}), con("start", "c")],
         [add("c", "condition", {"expression": good_e}), con("start", "c")])
tmpl = [
    ("ok: {{ input.ok == True }}", "ok: {{ input.ok == true }}"), ("{{ input.name.toLowerCase() }}", "{{ lower(input.name) }}"),
    ("n: {{ input.n === 1 }}", "n: {{ input.n == 1 }}"), ("{{ input.x == null ? 'none' : input.x }}", "{{ input.x == nil ? 'none' : input.x }}"),
    ("{{ (input.a + 1 }}", "{{ (input.a + 1) }}"),
]
for bad, good_t in tmpl:
    case("expression", "template " + bad, START, [add("l", "log", {"message": bad}), con("start", "l")],
         [add("l", "log", {"message": good_t}), con("start", "l")])

# --- no trigger ----------------------------------------------------------------------------------
nt = [
    [add("fetch", "http.request", {"method": "GET", "url": URL}), add("l", "log", {"message": "x"}), con("fetch", "l")],
    [add("l", "log", {"message": "x"})],
    [add("w", "wait", {"duration": "1m"}), add("l", "log", {"message": "done"}), con("w", "l")],
    [add("c", "condition", {"expression": "input.n > 1"}), add("a", "log", {"message": "big"}), add("b", "log", {"message": "small"}), con("c", "a", "true"), con("c", "b", "false")],
    [add("t", "transform", {"value": {"x": "{{ input.x }}"}}), add("l", "log", {"message": "{{ steps.t.output.x }}"}), con("t", "l")],
    [add("f", "fail", {"message": "x", "fail_attempts": 1})],
    [add("a", "log", {"message": "a"}), add("b", "log", {"message": "b"})],
    [add("fetch", "http.request", {"method": "POST", "url": URL, "body": {"a": 1}}), add("w", "wait", {"signal": "go"}), con("fetch", "w")],
]
for i, ops in enumerate(nt):
    roots = [o["block_id"] for o in ops if o["operation_type"] == "add" and not any(c.get("target_block_id") == o["block_id"] for c in ops if c["operation_type"] == "connect")]
    case("no_trigger", f"no trigger {i}", [], ops, ops + [add("trigger", "trigger.manual")] + [con("trigger", r) for r in roots])

# --- references to blocks -------------------------------------------------------------------------
refs = [
    ("misspelt", FETCH, "{{ steps.fecth.output.body }}", "{{ steps.fetch.output.body }}", "fetch"),
    ("case", FETCH, "{{ steps.Fetch.output.body }}", "{{ steps.fetch.output.body }}", "fetch"),
    ("plural", FETCH, "{{ steps.fetches.output.status }}", "{{ steps.fetch.output.status }}", "fetch"),
    ("type name", FETCH, "{{ steps.http.request.output.body }}", "{{ steps.fetch.output.body }}", "fetch"),
    ("type name condition", CHECK, "{{ steps.condition.output.result }}", "{{ steps.check.output.result }}", "check"),
    ("no output", FETCH, "{{ steps.fetch.body }}", "{{ steps.fetch.output.body }}", "fetch"),
    ("no steps", FETCH, "{{ fetch.output.body }}", "{{ steps.fetch.output.body }}", "fetch"),
    ("outputs", FETCH, "{{ steps.fetch.outputs.body }}", "{{ steps.fetch.output.body }}", "fetch"),
    ("inptu", START, "{{ inptu.name }}", "{{ input.name }}", "start"),
    ("inputs", START, "{{ inputs.name }}", "{{ input.name }}", "start"),
    ("run id", START, "{{ run.run_id }}", "{{ run.id }}", "start"),
    ("workflow id", START, "{{ workflow.workflow_id }}", "{{ workflow.id }}", "start"),
    ("two refs", FETCH, "{{ steps.fecth.output.status }} {{ steps.fecth.output.body }}", "{{ steps.fetch.output.status }} {{ steps.fetch.output.body }}", "fetch"),
    ("text around", CHECK, "status {{ steps.chek.output.result }}", "status {{ steps.check.output.result }}", "check"),
]
for name, setup, bad, good_m, parent in refs:
    case("reference", name, setup, [add("l", "log", {"message": bad}), con(parent, "l")],
         [add("l", "log", {"message": good_m}), con(parent, "l")])
case("reference", "self", FETCH, [add("check2", "condition", {"expression": "steps.check2.output.status == 200"}), con("fetch", "check2")],
     [add("check2", "condition", {"expression": "steps.fetch.output.status == 200"}), con("fetch", "check2")])
case("reference", "condition misspelt", FETCH, [add("c", "condition", {"expression": "steps.fetc.output.status == 200"}), con("fetch", "c")],
     [add("c", "condition", {"expression": "steps.fetch.output.status == 200"}), con("fetch", "c")])
case("reference", "transform nested", FETCH, [add("t", "transform", {"value": {"items": "{{ steps.ftch.output.body }}"}}), con("fetch", "t")],
     [add("t", "transform", {"value": {"items": "{{ steps.fetch.output.body }}"}}), con("fetch", "t")])
case("reference", "url template", START + [add("cfg", "transform", {"value": {"host": "api.example.com"}}), con("start", "cfg")],
     [add("h", "http.request", {"method": "GET", "url": "https://{{ steps.config.output.host }}/x"}), con("cfg", "h")],
     [add("h", "http.request", {"method": "GET", "url": "https://{{ steps.cfg.output.host }}/x"}), con("cfg", "h")])
case("reference", "self log", FETCH, [add("fetch2", "http.request", {"method": "GET", "url": "https://api.example.com/{{ steps.fetch2.output.body.id }}"}), con("fetch", "fetch2")],
     [add("fetch2", "http.request", {"method": "GET", "url": "https://api.example.com/{{ steps.fetch.output.body.id }}"}), con("fetch", "fetch2")])

# --- edge branches -------------------------------------------------------------------------------
for bad, good_b in [(True, "true"), (False, "false"), ("yes", "true"), ("no", "false"), ("True", "true"), ("FALSE", "false"),
                    ("then", "true"), ("else", "false"), (1, "true"), (0, "false")]:
    case("branch", f"branch {bad!r}", CHECK + [add("ok", "log", {"message": "ok"})],
         [con("check", "ok", bad), add("after", "log", {"message": "after"}), con("ok", "after")],
         [con("check", "ok", good_b), add("after", "log", {"message": "after"}), con("ok", "after")])
case("branch", "branch on plain edge", FETCH + [add("l", "log", {"message": "x"})], [con("fetch", "l", "true")], [con("fetch", "l")])

# --- references into outputs -----------------------------------------------------------------------
outs = [
    ("http total", FETCH, "fetch", "{{ steps.fetch.output.total }}", "{{ steps.fetch.output.body.total }}"),
    ("http status_code", FETCH, "fetch", "{{ steps.fetch.output.status_code }}", "{{ steps.fetch.output.status }}"),
    ("http statusCode", FETCH, "fetch", "{{ steps.fetch.output.statusCode }}", "{{ steps.fetch.output.status }}"),
    ("http data items", FETCH, "fetch", "{{ steps.fetch.output.items }}", "{{ steps.fetch.output.body.items }}"),
    ("http header", FETCH, "fetch", "{{ steps.fetch.output.header }}", "{{ steps.fetch.output.headers }}"),
    ("http statuscode", FETCH, "fetch", "{{ steps.fetch.output.statuscode }}", "{{ steps.fetch.output.status }}"),
    ("condition results", CHECK, "check", "{{ steps.check.output.results }}", "{{ steps.check.output.result }}"),
    ("log text", START + [add("lg", "log", {"message": "m"}), con("start", "lg")], "lg", "{{ steps.lg.output.messages }}", "{{ steps.lg.output.message }}"),
    ("transform literal", START + [add("t", "transform", {"value": {"count": 1, "name": "x"}}), con("start", "t")], "t", "{{ steps.t.output.cont }}", "{{ steps.t.output.count }}"),
    ("wait payload", START + [add("w", "wait", {"signal": "go"}), con("start", "w")], "w", "{{ steps.w.output.payload }}", "{{ steps.w.output.signal.payload }}"),
    ("fail attempt", START + [add("f", "fail", {"message": "m", "fail_attempts": 1}), con("start", "f")], "f", "{{ steps.f.output.attempt }}", "{{ steps.f.output.attempts }}"),
    ("http body typo", FETCH, "fetch", "{{ steps.fetch.output.bdy }}", "{{ steps.fetch.output.body }}"),
]
for name, setup, parent, bad, good_m in outs:
    case("output_ref", name, setup, [add("l", "log", {"message": bad}), con(parent, "l")],
         [add("l", "log", {"message": good_m}), con(parent, "l")])
case("output_ref", "condition total", FETCH, [add("c", "condition", {"expression": "steps.fetch.output.total > 0"}), con("fetch", "c")],
     [add("c", "condition", {"expression": "steps.fetch.output.body.total > 0"}), con("fetch", "c")])
case("output_ref", "condition status code", FETCH, [add("c", "condition", {"expression": "steps.fetch.output.status_code == 200"}), con("fetch", "c")],
     [add("c", "condition", {"expression": "steps.fetch.output.status == 200"}), con("fetch", "c")])

# --- several problems in one op -------------------------------------------------------------------
multi = [
    ("alias and duration", "wait", {"delay": "5 minutes"}, "wait", {"duration": "5m"}),
    ("type and param alias", "sleep", {"delay": "30s"}, "wait", {"duration": "30s"}),
    ("param alias and method", "http.request", {"method": "get", "endpoint": URL}, "http.request", {"method": "GET", "url": URL}),
    ("two aliases", "http.request", {"verb": "POST", "address": URL}, "http.request", {"method": "POST", "url": URL}),
    ("type alias and method", "fetch", {"method": "get", "url": URL}, "http.request", {"method": "GET", "url": URL}),
    ("method and timeout", "http.request", {"method": "get", "url": URL, "timeout_ms": "2000"}, "http.request", {"method": "GET", "url": URL, "timeout_ms": 2000}),
    ("alias and expression", "condition", {"predicate": "input.n = 5"}, "condition", {"expression": "input.n == 5"}),
    ("type, alias, expression", "if", {"condition": "input.ok == True"}, "condition", {"expression": "input.ok == true"}),
    ("alias and signal value", "wait", {"wait_for": "approve", "timeout": "10 minutes"}, "wait", {"signal": "approve", "timeout": "10m"}),
    ("timeout alias in seconds", "http.request", {"method": "GET", "url": URL, "timeout": "30s"}, "http.request", {"method": "GET", "url": URL, "timeout_ms": 30000}),
    ("text and typo type", "lgo", {"text": "hi"}, "log", {"message": "hi"}),
]
for name, t, bad, gt, good_p in multi:
    case("multi", name, START, [add("b", t, bad), con("start", "b")], [add("b", gt, good_p), con("start", "b")])

# --- operations and ids --------------------------------------------------------------------------------
case("operation", "create", START, [{"operation_type": "create", "block_id": "l", "type": "log", "params": {"message": "x"}}, con("start", "l")],
     [add("l", "log", {"message": "x"}), con("start", "l")])
case("operation", "link", FETCH + [add("l", "log", {"message": "x"})], [{"operation_type": "link", "block_id": "fetch", "target_block_id": "l"}], [con("fetch", "l")])
case("operation", "delete", FETCH + [add("l", "log", {"message": "x"})], [{"operation_type": "delete", "block_id": "l"}], [{"operation_type": "remove", "block_id": "l"}])
case("operation", "set", FETCH, [{"operation_type": "set", "block_id": "fetch", "params": {"method": "POST"}}], [upd("fetch", {"method": "POST"})])
case("operation", "id with space", START, [add("fetch data", "http.request", {"method": "GET", "url": URL}), con("start", "fetch data")],
     [add("fetch_data", "http.request", {"method": "GET", "url": URL}), con("start", "fetch_data")])
case("operation", "target typo", FETCH + [add("l", "log", {"message": "x"})], [con("fetch", "L")], [con("fetch", "l")])
case("operation", "update typo", FETCH, [upd("fecth", {"method": "POST"})], [upd("fetch", {"method": "POST"})])
case("operation", "source typo", FETCH + [add("notify", "log", {"message": "x"})], [con("fetchh", "notify")], [con("fetch", "notify")])

# --- the same mistakes in a definition given to POST /api/workflows -----------------------------
T = add("start", "trigger.manual")
defs = [
    ("type alias", [T, add("f", "fetch", {"method": "GET", "url": URL}), con("start", "f")], [T, add("f", "http.request", {"method": "GET", "url": URL}), con("start", "f")]),
    ("param alias", [T, add("c", "condition", {"predicate": "input.n > 1"}), con("start", "c")], [T, add("c", "condition", {"expression": "input.n > 1"}), con("start", "c")]),
    ("duration", [T, add("w", "wait", {"duration": "10 minutes"}), con("start", "w")], [T, add("w", "wait", {"duration": "10m"}), con("start", "w")]),
    ("branch bool", [T, add("c", "condition", {"expression": "input.n > 1"}), add("y", "log", {"message": "y"}), add("n", "log", {"message": "n"}),
                     con("start", "c"), con("c", "y", True), con("c", "n", False)],
                    [T, add("c", "condition", {"expression": "input.n > 1"}), add("y", "log", {"message": "y"}), add("n", "log", {"message": "n"}),
                     con("start", "c"), con("c", "y", "true"), con("c", "n", "false")]),
    ("no trigger", [add("f", "http.request", {"method": "GET", "url": URL}), add("l", "log", {"message": "{{ steps.f.output.status }}"}), con("f", "l")],
                   [add("f", "http.request", {"method": "GET", "url": URL}), add("l", "log", {"message": "{{ steps.f.output.status }}"}), con("f", "l"),
                    add("trigger", "trigger.manual"), con("trigger", "f")]),
    ("expression", [T, add("c", "condition", {"expression": "input.ok === true"}), con("start", "c")], [T, add("c", "condition", {"expression": "input.ok == true"}), con("start", "c")]),
    ("reference", [T, add("fetch", "http.request", {"method": "GET", "url": URL}), add("l", "log", {"message": "{{ steps.fecth.output.body }}"}), con("start", "fetch"), con("fetch", "l")],
                  [T, add("fetch", "http.request", {"method": "GET", "url": URL}), add("l", "log", {"message": "{{ steps.fetch.output.body }}"}), con("start", "fetch"), con("fetch", "l")]),
    ("output field", [T, add("fetch", "http.request", {"method": "GET", "url": URL}), add("l", "log", {"message": "{{ steps.fetch.output.total }}"}), con("start", "fetch"), con("fetch", "l")],
                     [T, add("fetch", "http.request", {"method": "GET", "url": URL}), add("l", "log", {"message": "{{ steps.fetch.output.body.total }}"}), con("start", "fetch"), con("fetch", "l")]),
    ("trigger alias", [add("t", "cron"), add("l", "log", {"message": "tick"}), con("t", "l")], [add("t", "trigger.schedule"), add("l", "log", {"message": "tick"}), con("t", "l")]),
    ("two problems", [T, add("w", "sleep", {"delay": "5 minutes"}), con("start", "w")], [T, add("w", "wait", {"duration": "5m"}), con("start", "w")]),
    ("number string", [T, add("f", "http.request", {"method": "get", "url": URL, "timeout_ms": "2000"}), con("start", "f")],
                      [T, add("f", "http.request", {"method": "GET", "url": URL, "timeout_ms": 2000}), con("start", "f")]),
    ("self reference", [T, add("fetch", "http.request", {"method": "GET", "url": URL}), add("c", "condition", {"expression": "steps.c.output.status == 200"}), con("start", "fetch"), con("fetch", "c")],
                       [T, add("fetch", "http.request", {"method": "GET", "url": URL}), add("c", "condition", {"expression": "steps.fetch.output.status == 200"}), con("start", "fetch"), con("fetch", "c")]),
]
for name, bad, good_d in defs:
    case("definition", name, [], bad, good_d, via="definition")

for fam, cases in families.items():
    with open(f"{fam}.json", "w") as f:
        json.dump({"family": fam, "cases": cases}, f, indent=1)
        f.write("\n")
print({k: len(v) for k, v in families.items()}, sum(len(v) for v in families.values()))
