// contend.js: two node-redlock v4 clients contend for one key through the
// proxy, with retryCount 2: node-redlock sends its unlock script after
// every failed attempt (a cleanup of a value the proxy never granted).
// Usage: node contend.js PORT ROUNDS. It prints one line at the end:
// DONE acquired refused failed-attempts.
"use strict";
const Redis = require("ioredis");
const Redlock4 = require("redlock4");

const port = Number(process.argv[2]);
const rounds = Number(process.argv[3] || 20);
const key = "contend:k";
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const say = (...a) => console.log(a.join(" "));

function client() {
  const c = new Redis({ host: "127.0.0.1", port, maxRetriesPerRequest: 1 });
  const r = new Redlock4([c], { retryCount: 2, retryDelay: 20, retryJitter: 10 });
  r.on("clientError", () => {});
  return { c, r };
}

async function main() {
  const a = client(), b = client();
  let acquired = 0, refused = 0, failedAttempts = 0;
  const got = (l) => { acquired++; failedAttempts += l.attempts - 1; };
  const lost = (e) => {
    if (!(e instanceof Redlock4.LockError)) throw e;
    refused++;
    failedAttempts += e.attempts;
  };

  // One refusal for certain: A holds the key while B tries three times.
  const held = await a.r.lock(key, 10000);
  got(held);
  try {
    await b.r.lock(key, 10000);
    say("ERROR B locked a held key");
    process.exit(1);
  } catch (e) {
    lost(e);
  }
  await held.unlock();

  // Then both contend, each round: the winner holds the key a moment.
  const worker = async (w) => {
    for (let i = 0; i < rounds; i++) {
      let l;
      try {
        l = await w.r.lock(key, 5000);
      } catch (e) {
        lost(e);
        continue;
      }
      got(l);
      await sleep(5);
      await l.unlock();
    }
  };
  await Promise.all([worker(a), worker(b)]);
  say("DONE", acquired, refused, failedAttempts);
  a.c.disconnect();
  b.c.disconnect();
}
main().catch((e) => { say("ERROR", e && e.stack || e); process.exit(1); });
