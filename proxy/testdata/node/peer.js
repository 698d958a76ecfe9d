// peer.js drives node-redlock (v5 and v4) with ioredis through the proxy.
// Usage: node peer.js PORT. It prints one line per step and waits for a
// line on stdin before the next step, so the Go test can check the masters.
"use strict";
const Redis = require("ioredis");
const Redlock = require("redlock").default;
const Redlock4 = require("redlock4");
const readline = require("readline");

const port = Number(process.argv[2]);
const rl = readline.createInterface({ input: process.stdin });
const lines = rl[Symbol.asyncIterator]();
const next = async () => (await lines.next()).value;
const say = (...a) => console.log(a.join(" "));

async function main() {
  const client = new Redis({ host: "127.0.0.1", port, maxRetriesPerRequest: 1 });
  const redlock = new Redlock([client], { retryCount: 0 });
  redlock.on("error", () => {});

  // v5, several resources in one lock.
  const res = ["node:a", "node:b", "node:c"];
  let lock = await redlock.acquire(res, 10000);
  say("ACQUIRED", lock.value, res.join(","));
  await next();
  try {
    await redlock.acquire(["node:z", "node:b"], 10000);
    say("ERROR second acquire succeeded");
  } catch (e) {
    say("REFUSED");
  }
  await next();
  lock = await lock.extend(20000);
  say("EXTENDED", lock.value);
  await next();
  await lock.release();
  say("RELEASED", lock.value);
  await next();

  // v4 (callback-era API with promises), one resource.
  const r4 = new Redlock4([client], { retryCount: 0 });
  r4.on("clientError", () => {});
  let l4 = await r4.lock("node4:a", 10000);
  say("ACQUIRED4", l4.value, "node4:a");
  await next();
  l4 = await l4.extend(20000);
  say("EXTENDED4", l4.value);
  await next();
  await l4.unlock();
  say("RELEASED4", l4.value);
  client.disconnect();
  rl.close();
}
main().catch((e) => { say("ERROR", e && e.stack || e); process.exit(1); });
