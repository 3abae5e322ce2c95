// The ID generators the exec target runs, each as a function that returns
// the next ID as a string: a Snowflake in decimal, or a UUID (or throws
// when the library refuses).
// Every Snowflake-style library is configured for the same bit layout as
// the scenarios: 41 bits of milliseconds since 2024-01-01, 10 bits of
// worker ID, 12 bits of sequence (or the library's own split of those 22
// low bits, mapped so the worker ID lands in bits 12..21).
'use strict';

const EPOCH_MS = 1704067200000; // 2024-01-01T00:00:00Z
const EPOCH = BigInt(EPOCH_MS);

// mvp is the design article's MVP algorithm: 41/10/12 from 2024-01-01;
// throws when Date.now() is behind the last timestamp; within a
// millisecond increments the sequence and, when it wraps past 4095, spins
// to the next millisecond; resets the sequence on a new millisecond.
function mvp(worker) {
  return snowflake(worker, true);
}

// broken is mvp without the regression check: a clock that goes back is
// taken for a new millisecond (sequence reset), deliberately wrong.
function broken(worker) {
  return snowflake(worker, false);
}

// snowflake is mvp, with the regression check only when checkBack is set.
function snowflake(worker, checkBack) {
  const w = BigInt(worker);
  let last = -1n;
  let seq = 0n;
  return () => {
    let now = BigInt(Date.now()) - EPOCH;
    if (checkBack && now < last) {
      throw new Error(`clock moved backwards by ${last - now} ms`);
    }
    if (now === last) {
      seq = (seq + 1n) & 4095n;
      if (seq === 0n) {
        while (now <= last) now = BigInt(Date.now()) - EPOCH;
      }
    } else {
      seq = 0n;
    }
    last = now;
    return ((now << 22n) | (w << 12n) | seq).toString();
  };
}

// sapphire: @sapphire/snowflake (discord.js's generator); its 5-bit worker
// and 5-bit process IDs together are the 10-bit worker field.
function sapphire(worker) {
  const { Snowflake } = require('@sapphire/snowflake');
  const sf = new Snowflake(EPOCH);
  const opts = { workerId: BigInt(worker >> 5), processId: BigInt(worker & 31) };
  return () => sf.generate(opts).toString();
}

// nodejsSnowflake: nodejs-snowflake (Rust/WASM): 12-bit instance ID and
// 10-bit sequence; instance ID worker<<2 puts the worker in bits 12..21
// (its sequence then fills bits 0..9).
function nodejsSnowflake(worker) {
  const { Snowflake } = require('nodejs-snowflake');
  const sf = new Snowflake({ custom_epoch: EPOCH_MS, instance_id: worker << 2 });
  return () => sf.getUniqueID().toString();
}

// flakeIdgen: flake-idgen (10-bit id = datacenter and worker), synchronous
// mode (it throws where the callback mode would wait).
function flakeIdgen(worker) {
  const FlakeId = require('flake-idgen');
  const gen = new FlakeId({ id: worker, epoch: EPOCH_MS });
  return () => gen.next().readBigUInt64BE().toString();
}

// snowflakeId: snowflake-id (10-bit machine ID "mid").
function snowflakeId(worker) {
  const SnowflakeId = require('snowflake-id').default;
  const gen = new SnowflakeId({ mid: worker, offset: EPOCH_MS });
  return () => gen.generate();
}

// uuidV7 and uuidv7Lib: 128-bit UUIDv7 strings.
function uuidV7() {
  const { v7 } = require('uuid');
  return () => v7();
}

function uuidv7Lib() {
  const { uuidv7 } = require('uuidv7');
  return () => uuidv7();
}

// uuidV7Stateless is uuid's v7() handed the time (options.msecs), which
// bypasses the library's monotonic state: each call draws a random
// sequence, so IDs within a millisecond come in random order and a clock
// step back takes them back. A deliberate negative control for the order
// check on UUIDv7s.
function uuidV7Stateless() {
  const { v7 } = require('uuid');
  return () => v7({ msecs: Date.now() });
}

module.exports = {
  mvp, broken, sapphire, 'nodejs-snowflake': nodejsSnowflake, 'flake-idgen': flakeIdgen,
  'snowflake-id': snowflakeId, 'uuid-v7': uuidV7, uuidv7: uuidv7Lib, 'uuid-v7-stateless': uuidV7Stateless,
};
