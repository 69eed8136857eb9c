#!/usr/bin/env python3
"""Writes the held-out repair set: agent mistakes written after the repair work was done, by
someone who did not write the hints, in phrasings the main corpus does not use. It measures
how the hints generalize; TestRepairHeldOut reports its figure and fails on any hint that
misleads. Run from this directory: python3 gen_heldout.py
"""
import json

def block(bid, typ, params=None):
    op = {"operation_type": "add", "block_id": bid, "type": typ}
    if params is not None:
        op["params"] = params
    return op

def edge(a, b, branch=None):
    op = {"operation_type": "connect", "block_id": a, "target_block_id": b}
    if branch is not None:
        op["branch"] = branch
    return op

def change(bid, params):
    return {"operation_type": "update", "block_id": bid, "params": params}

API = "https://orders.example.com/v1/orders"
T = [block("begin", "trigger.manual")]
GET = T + [block("orders", "http.request", {"method": "GET", "url": API}), edge("begin", "orders")]
IF = GET + [block("gate", "condition", {"expression": "steps.orders.output.status == 200"}), edge("orders", "gate")]

cases = []

def case(name, setup, batch, intended):
    cases.append({"name": name, "setup": setup, "batch": batch, "intended": intended})

# Block types by the names of other products and languages.
sample = {
    "http.request": {"method": "POST", "url": API},
    "condition": {"expression": "input.total > 100"},
    "wait": {"duration": "30s"},
    "log": {"message": "order received"},
    "transform": {"value": {"ok": True}},
}
for wrong, right in [
    ("http_call", "http.request"), ("api_request", "http.request"), ("rest", "http.request"),
    ("HTTPRequest", "http.request"), ("http-request", "http.request"),
    ("if", "condition"), ("branch", "condition"), ("if_else", "condition"),
    ("delay", "wait"), ("sleep", "wait"), ("pause", "wait"),
    ("print", "log"), ("logger", "log"), ("console_log", "log"),
    ("set", "transform"), ("map", "transform"), ("assign", "transform"),
]:
    case(f"type {wrong}", T, [block("step", wrong, sample[right]), edge("begin", "step")],
         [block("step", right, sample[right]), edge("begin", "step")])

# Param names from other tools.
for typ, wrong, right, value in [
    ("log", "msg", "message", "hi"),
    ("log", "content", "message", "hi"),
    ("http.request", "uri", "url", API),
    ("http.request", "endpoint_url", "url", API),
    ("http.request", "verb", "method", "GET"),
    ("http.request", "http_method", "method", "GET"),
    ("http.request", "payload", "body", {"id": 1}),
    ("http.request", "query_params", "query", {"page": "2"}),
    ("condition", "condition", "expression", "input.total > 100"),
    ("condition", "expr", "expression", "input.total > 100"),
    ("wait", "sleep_for", "duration", "10s"),
    ("wait", "signal_name", "signal", "approved"),
    ("transform", "output", "value", {"ok": True}),
    ("fail", "error", "message", "stop"),
]:
    base = {"http.request": {"method": "GET", "url": API}}.get(typ, {})
    wrongp = dict(base); wrongp.pop(right, None); wrongp[wrong] = value
    rightp = dict(base); rightp[right] = value
    case(f"param {typ}.{wrong}", T, [block("step", typ, wrongp), edge("begin", "step")],
         [block("step", typ, rightp), edge("begin", "step")])

# Values written for people.
# "90 seconds" is meant as 1m30s, the form Go's durations print (90s is the same duration).
for wrong, right in [("1 hour", "1h"), ("90 seconds", "1m30s"), ("10 mins", "10m"), ("PT30S", "30s"),
                     ("2 hrs", "2h"), ("45sec", "45s")]:
    case(f"duration {wrong}", T, [block("hold", "wait", {"duration": wrong}), edge("begin", "hold")],
         [block("hold", "wait", {"duration": right}), edge("begin", "hold")])
case("method lowercase", T, [block("call", "http.request", {"method": "post", "url": API}), edge("begin", "call")],
     [block("call", "http.request", {"method": "POST", "url": API}), edge("begin", "call")])
case("timeout as text", T, [block("call", "http.request", {"method": "GET", "url": API, "timeout_ms": "15000"}), edge("begin", "call")],
     [block("call", "http.request", {"method": "GET", "url": API, "timeout_ms": 15000}), edge("begin", "call")])
case("fail_attempts as text", T, [block("stop", "fail", {"message": "x", "fail_attempts": "2"}), edge("begin", "stop")],
     [block("stop", "fail", {"message": "x", "fail_attempts": 2}), edge("begin", "stop")])

# Expressions from other languages (&& and || are not among them: expr-lang accepts both).
for wrong, right in [
    ("input.total = 100", "input.total == 100"),
    ("input.total === 100", "input.total == 100"),
    ("input.total !== 0", "input.total != 0"),
    ("input.coupon != null", "input.coupon != nil"),
    ("input.country <> 'FR'", "input.country != 'FR'"),
    ("input.paid == True", "input.paid == true"),
    ("(input.total > 100", "(input.total > 100)"),
    ("{{ input.total > 100 }}", "input.total > 100"),
]:
    case(f"expression {wrong}", T, [block("gate", "condition", {"expression": wrong}), edge("begin", "gate")],
         [block("gate", "condition", {"expression": right}), edge("begin", "gate")])

# References in templates.
case("reference without output", GET, [block("note", "log", {"message": "{{ steps.orders.status }}"}), edge("orders", "note")],
     [block("note", "log", {"message": "{{ steps.orders.output.status }}"}), edge("orders", "note")])
case("reference without steps", GET, [block("note", "log", {"message": "{{ orders.output.status }}"}), edge("orders", "note")],
     [block("note", "log", {"message": "{{ steps.orders.output.status }}"}), edge("orders", "note")])
case("reference misspelt block", GET, [block("note", "log", {"message": "{{ steps.order.output.status }}"}), edge("orders", "note")],
     [block("note", "log", {"message": "{{ steps.orders.output.status }}"}), edge("orders", "note")])
case("reference field not in output", GET, [block("note", "log", {"message": "{{ steps.orders.output.count }}"}), edge("orders", "note")],
     [block("note", "log", {"message": "{{ steps.orders.output.body.count }}"}), edge("orders", "note")])

# Branches.
for wrong in [True, "yes", "TRUE", 1]:
    case(f"branch {json.dumps(wrong)}", IF + [block("ok", "log", {"message": "ok"})], [edge("gate", "ok", wrong)],
         [edge("gate", "ok", "true")])
for wrong in [False, "no", "False"]:
    case(f"branch {json.dumps(wrong)}", IF + [block("ko", "log", {"message": "ko"})], [edge("gate", "ko", wrong)],
         [edge("gate", "ko", "false")])

# Operation names.
for wrong, right in [("insert", "add"), ("delete", "remove"), ("link", "connect"), ("modify", "update")]:
    if right == "add":
        bad = {"operation_type": wrong, "block_id": "note", "type": "log", "params": {"message": "m"}}
        case(f"operation {wrong}", T, [bad, edge("begin", "note")], [block("note", "log", {"message": "m"}), edge("begin", "note")])
    elif right == "remove":
        case(f"operation {wrong}", GET + [block("extra", "log", {"message": "m"})],
             [{"operation_type": wrong, "block_id": "extra"}], [{"operation_type": "remove", "block_id": "extra"}])
    elif right == "connect":
        case(f"operation {wrong}", GET + [block("note", "log", {"message": "m"})],
             [{"operation_type": wrong, "block_id": "orders", "target_block_id": "note"}], [edge("orders", "note")])
    else:
        case(f"operation {wrong}", GET, [{"operation_type": wrong, "block_id": "orders", "params": {"method": "POST", "url": API}}],
             [change("orders", {"method": "POST", "url": API})])

# No trigger at all.
case("no trigger", [], [block("call", "http.request", {"method": "GET", "url": API}), block("note", "log", {"message": "done"}), edge("call", "note")],
     [block("call", "http.request", {"method": "GET", "url": API}), block("note", "log", {"message": "done"}), edge("call", "note"),
      block("trigger", "trigger.manual"), edge("trigger", "call")])

with open("heldout.json", "w") as f:
    json.dump({"family": "heldout", "cases": cases}, f, indent=1)
    f.write("\n")
print(len(cases), "cases")
