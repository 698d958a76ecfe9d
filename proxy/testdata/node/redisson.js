// redisson.js drives npm node-redisson 1.0.4 (a Node port of Redisson's
// RLock, Pub/Sub wake-ups) with ioredis through the proxy. Usage: node
// redisson.js PORT. It prints one line per step and waits for a line on
// stdin before the next step, so the Go test can check the masters.
"use strict";
const { Redisson } = require("node-redisson");
const readline = require("readline");

const port = Number(process.argv[2]);
const rl = readline.createInterface({ input: process.stdin });
const lines = rl[Symbol.asyncIterator]();
const next = async () => (await lines.next()).value;
const say = (...a) => console.log(a.join(" "));
const redisson = () => new Redisson({ redis: { options: { host: "127.0.0.1", port, maxRetriesPerRequest: 1 } } });

async function main() {
  const a = redisson(), b = redisson();
  const la = a.getLock("nr:lock"), lb = b.getLock("nr:lock");
  await la.lock(10000n); // a lease: no watchdog
  await la.lock(10000n); // re-entry
  say("LOCKED");
  await next();
  say("REFUSED", await lb.tryLock(0, 10000n));
  await next();
  await la.unlock(); // count 2 → 1: still held
  say("STILL", await lb.tryLock(0, 10000n));
  await next();
  // b waits (subscribes to the lock's channel); a's unlock wakes it.
  const t0 = Date.now();
  const waiting = lb.lock(10000n);
  await new Promise((r) => setTimeout(r, 200));
  await la.unlock();
  await waiting;
  say("WOKEN", Date.now() - t0);
  await next();
  await lb.unlock();
  say("RELEASED");
  await next();
  await la.lock(10000n);
  say("FORCED", await lb.forceUnlock());
  await next();
  say("DONE");
  // Not quit(): node-redisson leaves the wait's timeout timer running
  // after the wake-up, and its UNSUBSCRIBE on a quit connection would
  // reject unhandled.
  process.exit(0);
}

main().catch((e) => {
  say("ERROR", e && e.stack ? e.stack.replace(/\n/g, " | ") : e);
  process.exit(1);
});
