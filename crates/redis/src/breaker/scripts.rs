//! The breaker store's Lua scripts: every one runs atomically on Redis server time.

use redis::Script;

/// Shared by every script: the server's time, the state read back, and a trip.
/// KEYS: fails, open, trips, probe, streak. ARGV: threshold, open_ms (the first spell),
/// state_ttl_ms, probe_ms, token, payload, open_max_ms (the longest spell).
///
/// A trip opens for the spell of its place in the streak of trips without a close in between:
/// `open_ms × 2^(streak − 1)`, capped at `open_max_ms` (as the in-process breaker's
/// `OpenBackoff::Exponential`). A failure kind that trips for its own length (`t<ms>,`) opens
/// for exactly that length from closed, and for the longer of it and the streak's spell when a
/// probe re-trips (as the in-process breaker does); either way it counts in the streak. The
/// streak is counted here, atomically with the trip, and lives exactly as long as the open state
/// it belongs to (both expire at the same instant on the server's clock, set by every trip:
/// two relative TTLs set a millisecond apart would let the streak outlive the state), so it can
/// never outlive the breaker's state; a probe that closes the breaker and an operator's reset
/// delete it.
const PRELUDE: &str = "local t = redis.call('TIME')\n\
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n\
local function state()\n\
  local open = redis.call('GET', KEYS[2])\n\
  if not open then return {0, tonumber(redis.call('GET', KEYS[1]) or 0)} end\n\
  open = tonumber(open)\n\
  if now < open then return {1, open - now} end\n\
  local ttl = redis.call('PTTL', KEYS[4])\n\
  if ttl > 0 then return {3, ttl} end\n\
  return {4, 0}\n\
end\n\
local function trip(own, exact)\n\
  local n = redis.call('INCR', KEYS[5])\n\
  local k = n - 1\n\
  if k > 40 then k = 40 end\n\
  local ms = tonumber(ARGV[2]) * (2 ^ k)\n\
  if ms > tonumber(ARGV[7]) then ms = tonumber(ARGV[7]) end\n\
  if exact or own > ms then ms = own end\n\
  ms = math.floor(ms)\n\
  local at = now + ms + tonumber(ARGV[3])\n\
  redis.call('SET', KEYS[2], now + ms)\n\
  redis.call('PEXPIREAT', KEYS[2], at)\n\
  redis.call('PEXPIREAT', KEYS[5], at)\n\
  redis.call('INCR', KEYS[3])\n\
  redis.call('PEXPIRE', KEYS[3], 86400000)\n\
  redis.call('DEL', KEYS[1])\n\
end\n";

/// Admission when the cached view cannot decide: {0,n} closed, {1,ms} open for ms, {2,0} the
/// probe permit is yours, {3,ttl} another probe is out.
const ADMIT: &str = "local open = redis.call('GET', KEYS[2])\n\
if not open then return {0, tonumber(redis.call('GET', KEYS[1]) or 0)} end\n\
open = tonumber(open)\n\
if now < open then return {1, open - now} end\n\
if redis.call('SET', KEYS[4], ARGV[5], 'NX', 'PX', ARGV[4]) then return {2, 0} end\n\
local ttl = redis.call('PTTL', KEYS[4])\n\
if ttl < 0 then ttl = 0 end\n\
return {3, ttl}\n";

/// Outcomes of calls admitted while closed, in order: `s` success, `f` a counted failure,
/// `t<ms>,` a failure that trips at once for ms. Once the breaker is open they no longer
/// count (they were admitted in an epoch that has ended). Returns the state.
const REPORT: &str = "local b = ARGV[6]\n\
local i = 1\n\
while i <= #b do\n\
  if redis.call('EXISTS', KEYS[2]) == 1 then break end\n\
  local c = string.sub(b, i, i)\n\
  if c == 's' then\n\
    redis.call('DEL', KEYS[1])\n\
    i = i + 1\n\
  elseif c == 'f' then\n\
    local n = redis.call('INCR', KEYS[1])\n\
    redis.call('PEXPIRE', KEYS[1], ARGV[3])\n\
    if n >= tonumber(ARGV[1]) then trip(0, false) end\n\
    i = i + 1\n\
  else\n\
    local j = string.find(b, ',', i, true)\n\
    trip(tonumber(string.sub(b, i + 1, j - 1)), true)\n\
    i = j + 1\n\
  end\n\
end\n\
return state()\n";

/// A probe's verdict, if its permit is still the caller's: `s` closes (and ends the streak),
/// `f` re-opens for the streak's next, longer spell, `t<ms>,` re-opens for at least ms, `r`
/// gives the permit back. Returns the state.
const PROBE_DONE: &str = "if redis.call('GET', KEYS[4]) == ARGV[5] then\n\
  local c = string.sub(ARGV[6], 1, 1)\n\
  redis.call('DEL', KEYS[4])\n\
  if c == 's' then redis.call('DEL', KEYS[1], KEYS[2], KEYS[5])\n\
  elseif c == 'f' then trip(0, false)\n\
  elseif c == 't' then trip(tonumber(string.sub(ARGV[6], 2, -2)), false) end\n\
end\n\
return state()\n";

/// An active prober reached the link: an open breaker becomes half-open now (the streak goes
/// on: the probe that follows closes the breaker or re-trips it for the next spell, and the
/// streak expires with the half-open state).
const WAKE: &str = "local open = redis.call('GET', KEYS[2])\n\
if open and now < tonumber(open) then\n\
  redis.call('SET', KEYS[2], now)\n\
  redis.call('PEXPIREAT', KEYS[2], now + tonumber(ARGV[3]))\n\
  redis.call('PEXPIREAT', KEYS[5], now + tonumber(ARGV[3]))\n\
end\n\
return state()\n";

/// An operator's reset: closed, counts and the streak cleared, any probe permit dropped.
const RESET: &str = "redis.call('DEL', KEYS[1], KEYS[2], KEYS[4], KEYS[5])\n\
return state()\n";

#[derive(Debug)]
pub(super) struct Scripts {
    pub(super) admit: Script,
    pub(super) report: Script,
    pub(super) probe_done: Script,
    pub(super) wake: Script,
    pub(super) reset: Script,
}

impl Scripts {
    pub(super) fn new() -> Self {
        let s = |body: &str| Script::new(&format!("{PRELUDE}{body}"));
        Scripts {
            admit: s(ADMIT),
            report: s(REPORT),
            probe_done: s(PROBE_DONE),
            wake: s(WAKE),
            reset: s(RESET),
        }
    }
}
