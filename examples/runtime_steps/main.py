"""One model-written script composing two tools through call_tool, on MontyRuntime.

The host drives the script step by step: at each ``Call`` it runs the tool in Python and
resumes the paused script with the result; the script prints as it goes and ends with a
tagged final result. Half way, the paused script is dumped to bytes and resumed from
them, as a durable agent would after a restart.

Run: ``python examples/runtime_steps/main.py``
"""

from __future__ import annotations

import json

from codeact import Call, Complete, MontyRuntime, Raised, ResumeError, ResumeValue

SCRIPT = """
import os
cart = call_tool("fetch_cart", {"user_id": os.getenv("CART_USER")})
subtotal = sum(item["price"] * item["qty"] for item in cart["items"])
rate = call_tool("tax_rate", {"region": os.getenv("TAX_REGION")})
print(f"{len(cart['items'])} lines, subtotal {subtotal:.2f}, tax rate {rate}")
{"type": "final_result", "value": {"user": cart["user_id"], "subtotal": subtotal,
                                    "total": round(subtotal * (1 + rate), 2)}}
"""

CARTS = {
    "u-42": [
        {"sku": "tea", "price": 4.5, "qty": 4},
        {"sku": "mug", "price": 12.0, "qty": 2},
        {"sku": "kettle", "price": 90.0, "qty": 1},
    ]
}
RATES = {"CA": 0.0725, "NY": 0.04}


def fetch_cart(user_id: str) -> dict:
    if user_id not in CARTS:
        raise KeyError(f"no cart for {user_id}")
    return {"user_id": user_id, "items": CARTS[user_id]}


def tax_rate(region: str) -> float:
    return RATES[region]


TOOLS = {"fetch_cart": fetch_cart, "tax_rate": tax_rate}


def main() -> None:
    runtime = MontyRuntime(environ={"CART_USER": "u-42", "TAX_REGION": "CA"})
    step = runtime.start(SCRIPT, "agent.py")
    while True:
        if step.stdout:
            print(f"  stdout: {step.stdout.rstrip()}")
        if isinstance(step, Call):
            call = step.call
            print(f"CALL     {call.name}({json.dumps(call.keyword_args)})  [call id {call.call_id}]")
            try:
                outcome: ResumeValue | ResumeError = ResumeValue(TOOLS[call.name](**call.keyword_args))
            except Exception as exc:  # a tool failure is raised into the script
                outcome = ResumeError(f"{type(exc).__name__}: {exc}")
            print(f"RESULT   {outcome}")
            if call.name == "fetch_cart":
                snapshot = call.dump()
                print(f"SNAPSHOT {len(snapshot)} bytes; resuming from the bytes")
                step = runtime.resume(snapshot, outcome)
            else:
                step = call.resume(outcome)
        elif isinstance(step, Complete):
            print(f"COMPLETE {json.dumps(step.value, indent=2)}")
            return
        elif isinstance(step, Raised):
            print(f"RAISED   {step.message}")
            raise SystemExit(1)


if __name__ == "__main__":
    main()
