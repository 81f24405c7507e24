"""The inbound load of the fault tests, run in a subprocess: `python -m faults.load [options]`.

Plays a channel: every conversation sends its messages in order (conversations in parallel
threads); a delivery that fails (the database went away, a 5xx) is delivered again with the
same message id until the host accepts it (done, unchanged, or parked for retry). Prints one
JSON line per accepted input, then a summary. With --settle it then finishes what the faults
left behind (parked inputs, unsent rows), as the dispatcher's sweep would, until nothing is
left or the deadline passes.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import signal
import sys
import threading
import time

import django


def _say(record: dict) -> None:
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


def drive(args) -> dict:
    from django.db import connection

    from falai_django import host

    deadline = time.monotonic() + args.seconds
    stats = {"accepted": 0, "errors": 0, "statuses": {}}
    lock = threading.Lock()

    def conversation(c: int) -> None:
        sid = f"{args.prefix}{c}"
        for m in range(args.messages):
            text = "meu nome é Ana" if args.flow == "wake" and m == 1 else f"mensagem #{m}"
            message_id = f"{sid}.{m}"
            while time.monotonic() < deadline:
                try:
                    result = host.handle(sid, {"message": text, "id": message_id}, send_inline=args.inline)
                except Exception as exc:  # noqa: BLE001 - the channel sees a 5xx and delivers again
                    with lock:
                        stats["errors"] += 1
                    _say({"error": f"{type(exc).__name__}: {str(exc)[:120]}", "id": message_id})
                    try:
                        connection.close()
                    except Exception:  # noqa: BLE001
                        pass
                    time.sleep(0.1)
                    continue
                with lock:
                    stats["accepted"] += 1
                    stats["statuses"][result.status] = stats["statuses"].get(result.status, 0) + 1
                _say({"accepted": message_id, "status": result.status})
                break
            time.sleep(args.pace)
        connection.close()

    threads = [threading.Thread(target=conversation, args=(c,)) for c in range(args.conversations)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return stats


def settle(args) -> bool:
    from django.db import connection

    from falai_django import host
    from falai_django.host import delivery
    from falai_django.models import HistoryItem, TurnRecord

    deadline = time.monotonic() + args.settle
    while time.monotonic() < deadline:
        try:
            parked = list(TurnRecord.objects.filter(status__in=["received", "retry"]).values_list("id", flat=True))
            for record_id in parked:
                host.process_record(record_id)
            unsent = sorted(set(HistoryItem.objects.filter(role="assistant", send_status__in=["pending", "sending"])
                                .values_list("conversation_id", flat=True)))
            for sid in unsent:
                delivery.send_pending(sid)
            if not parked and not unsent:
                return True
        except Exception as exc:  # noqa: BLE001 - the database may still be coming back
            _say({"settle_error": f"{type(exc).__name__}: {str(exc)[:120]}"})
            connection.close()
        time.sleep(0.2)
    return False


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--conversations", type=int, default=6)
    parser.add_argument("--messages", type=int, default=5)
    parser.add_argument("--pace", type=float, default=0.05)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--prefix", default="c")
    parser.add_argument("--flow", default="chat")
    parser.add_argument("--inline", action="store_true", help="send in this process after commit")
    parser.add_argument("--settle", type=float, default=0, help="then finish leftovers for up to this long")
    args = parser.parse_args()
    # A run that hangs prints every thread's stack on SIGUSR1 (the fault tests send it before killing it).
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
    django.setup()
    stats = drive(args)
    _say({"summary": stats})
    if args.settle:
        _say({"settled": settle(args)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
