"""peer.py drives redis-py's Lock through the proxy (system python3 with
Debian's python3-redis). Usage: python3 peer.py PORT. One line per step;
it waits for a line on stdin before the next step."""
import sys

import redis
from redis.exceptions import LockNotOwnedError


def say(*a):
    print(*a, flush=True)


def wait():
    sys.stdin.readline()


r = redis.Redis(host="127.0.0.1", port=int(sys.argv[1]))
lock = r.lock("py:a", timeout=10, thread_local=False)
assert lock.acquire(blocking=False), "acquire"
token = lock.local.token.decode()
say("ACQUIRED", token, "py:a")
wait()
other = r.lock("py:a", timeout=10)
say("REFUSED" if not other.acquire(blocking=False) else "ERROR second acquire")
assert lock.locked() and lock.owned(), "locked/owned"
wait()
assert lock.extend(20), "extend add"
say("EXTENDED", r.pttl("py:a"))
wait()
assert lock.extend(5, replace_ttl=True), "extend replace"
say("REPLACED", r.pttl("py:a"))
wait()
assert lock.reacquire(), "reacquire"
say("REACQUIRED", r.pttl("py:a"))
wait()
lock.release()
say("RELEASED", token)
wait()
try:
    lock.local.token = token.encode()
    lock.release()
    say("ERROR second release")
except LockNotOwnedError:
    say("NOTOWNED")
