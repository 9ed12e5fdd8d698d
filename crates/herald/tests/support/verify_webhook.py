"""Verifies webhooks that herald sent with the Standard Webhooks reference library
(`standardwebhooks` from PyPI), an implementation independent of herald's own.

stdin: a JSON array of cases {"secret": "whsec_…", "body": "<base64 of the raw body>",
"headers": {"webhook-id": …, "webhook-timestamp": …, "webhook-signature": …, …}}.
stdout: a JSON array, one entry per case: null when the webhook verifies, else the error.
"""

import base64
import json
import sys

from standardwebhooks.webhooks import Webhook


def main() -> None:
    cases = json.load(sys.stdin)
    results = []
    for case in cases:
        try:
            Webhook(case["secret"]).verify(base64.b64decode(case["body"]), case["headers"])
            results.append(None)
        except Exception as e:  # noqa: BLE001 - every failure is a verdict
            results.append(f"{type(e).__name__}: {e}")
    json.dump(results, sys.stdout)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
