-- The scripting environment of one Lua VM, run once when the VM is created (ShaleDB's own code).
-- Arguments: H (a table only Rust and this file hold) and the real globals table.
local H, real = ...
local error, type, tostring, rawget, rawset, setmetatable, getmetatable, select, pairs, ipairs, xpcall, setfenv =
    error, type, tostring, rawget, rawset, setmetatable, getmetatable, select, pairs, ipairs, xpcall, setfenv
local raw_loadstring = loadstring
local sfind, ssub, slower, smatch, sgsub = string.find, string.sub, string.lower, string.match, string.gsub

-- Nothing that reaches files, the process or other chunks.
real.debug = nil
real.loadfile = nil
real.dofile = nil
real.load = nil
real.loadstring = nil
real.module = nil
real.require = nil
real.package = nil
real.os = nil
real.io = nil
real.newproxy = nil
real.print = nil
real.gcinfo = nil

-- An error as redis.pcall returns it: "-CODE msg" keeps its code, a bare "msg" gets ERR.
local function errt(s)
  local code, msg = 'ERR', s
  if ssub(s, 1, 1) == '-' then
    local sp = sfind(s, ' ', 1, true)
    if sp then
      code, msg = ssub(s, 2, sp - 1), ssub(s, sp + 1)
    else
      msg = ssub(s, 2)
    end
  end
  msg = sgsub(sgsub(msg, '^[\r\n]+', ''), '[\r\n]+$', '')
  return {err = code .. ' ' .. msg}
end
H.errt = errt

local redis = {}
real.redis = redis
redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING = 0, 1, 2, 3
redis.REDIS_VERSION, redis.REDIS_VERSION_NUM = '7.0.15', 0x07000f
redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL = 0, 1, 2, 2, 3

-- Functions written in Rust, so a script's `return redis.call(...)` is no tail call and its line is known.
redis.call = H.rcall
redis.pcall = H.rpcall

function redis.error_reply(e)
  if select('#', e) ~= 1 or type(e) ~= 'string' then return errt('wrong number or type of arguments') end
  if ssub(e, 1, 1) ~= '-' then e = '-' .. e end
  return errt(e)
end

function redis.status_reply(s)
  if type(s) ~= 'string' then return errt('wrong number or type of arguments') end
  return {ok = s}
end

function redis.sha1hex(...)
  if select('#', ...) ~= 1 then error(errt('wrong number of arguments')) end
  local s = ...
  if type(s) ~= 'string' and type(s) ~= 'number' then s = '' end
  return H.sha1hex(tostring(s))
end

function redis.log(level, ...)
  if select('#', ...) < 1 then error(errt('redis.log() requires two arguments or more.')) end
  if type(level) ~= 'number' then error(errt('First argument must be a number (log level).')) end
  if level < 0 or level > 3 then error(errt('Invalid debug level.')) end
  local parts = {}
  for i = 1, select('#', ...) do
    local a = select(i, ...)
    if type(a) == 'string' or type(a) == 'number' then parts[#parts + 1] = tostring(a) end
  end
  H.log(level, table.concat(parts, ' '))
end

function redis.setresp(v)
  if not H.running() then error(errt('redis.setresp can only be called inside a script invocation')) end
  if v ~= 2 and v ~= 3 then error(errt('RESP version must be 2 or 3.')) end
  H.resp = v
end

function redis.set_repl(...)
  if not H.running() then error(errt('redis.set_repl can only be called inside a script invocation')) end
  if select('#', ...) ~= 1 then error(errt('redis.set_repl() requires two arguments.')) end
  local v = ...
  if v ~= 0 and v ~= 1 and v ~= 2 and v ~= 3 then
    error(errt('Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.'))
  end
end

-- Every command's effects are replicated as such: nothing to switch on.
function redis.replicate_commands() return true end

function redis.acl_check_cmd(...)
  if not H.running() then error(errt('redis.acl_check_cmd can only be called inside a script invocation')) end
  local allowed, msg = H.aclcheck(...)
  if allowed == nil then error(errt(msg)) end
  return allowed
end

function redis.breakpoint() return false end
function redis.debug() end

local KNOWN_FLAGS = {['no-writes'] = true, ['allow-oom'] = true, ['allow-stale'] = true,
                     ['no-cluster'] = true, ['allow-cross-slot-keys'] = true}

-- FUNCTION LOAD only: H.loading = {fns = {}, order = {}} while the library's code runs.
local function register_function(...)
  local L = H.loading
  if not L then error(errt('redis.register_function can only be called on FUNCTION LOAD command')) end
  local n = select('#', ...)
  local name, cb, flags, desc
  if n == 1 then
    local t = ...
    if type(t) ~= 'table' then
      error(errt('calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).'))
    end
    for k, v in pairs(t) do
      if type(k) ~= 'string' then error(errt('named argument key given to redis.register_function is not a string')) end
      local lk = slower(k)
      if lk == 'function_name' then
        if type(v) ~= 'string' then error(errt('function_name argument given to redis.register_function must be a string')) end
        name = v
      elseif lk == 'description' then
        if type(v) ~= 'string' then error(errt('description argument given to redis.register_function must be a string')) end
        desc = v
      elseif lk == 'callback' then
        if type(v) ~= 'function' then error(errt('callback argument given to redis.register_function must be a function')) end
        cb = v
      elseif lk == 'flags' then
        if type(v) ~= 'table' then
          error(errt('flags argument to redis.register_function must be a table representing function flags'))
        end
        flags = v
      else
        error(errt('unknown argument given to redis.register_function'))
      end
    end
    if not name then error(errt('redis.register_function must get a function name argument')) end
    if not cb then error(errt('redis.register_function must get a callback argument')) end
  elseif n == 2 then
    name, cb = ...
    if type(name) ~= 'string' then error(errt('first argument to redis.register_function must be a string')) end
    if type(cb) ~= 'function' then error(errt('second argument to redis.register_function must be a function')) end
  else
    error(errt('wrong number of arguments to redis.register_function'))
  end
  local fl = {}
  if flags then
    for _, f in pairs(flags) do
      if type(f) ~= 'string' or not KNOWN_FLAGS[f] then error(errt('unknown flag given')) end
      fl[#fl + 1] = f
    end
  end
  if not smatch(name, '^[A-Za-z0-9_]+$') then
    error(errt('Library names can only contain letters, numbers, or underscores(_) and must be at least one character long'))
  end
  if L.fns[name] then error(errt('Function already exists in the library')) end
  L.fns[name] = {cb = cb, flags = fl, desc = desc}
  L.order[#L.order + 1] = name
end

-- The helpers are C functions in Redis: a script's `return redis.sha1hex()` keeps the script's frame, so
-- their errors name its line.
for _, n in ipairs({'error_reply', 'status_reply', 'sha1hex', 'log', 'setresp', 'set_repl', 'replicate_commands',
                    'acl_check_cmd', 'breakpoint', 'debug'}) do
  redis[n] = H.cwrap(redis[n])
end
register_function = H.cwrap(register_function)

-- Redis's pcall: an error raised as a table (a redis.* helper's, redis.call's) is returned as its `err`
-- string, as scripts written for Redis before 7 expect.
local raw_pcall = pcall
local function pcall_results(ok, ...)
  if ok then return true, ... end
  local e = ...
  if type(e) == 'table' then
    local m = e.err
    if type(m) == 'string' or type(m) == 'number' then e = m end
  end
  return false, e
end
real.pcall = H.cwrap(function(f, ...) return pcall_results(raw_pcall(f, ...)) end)

-- Read-only views of the libraries and of the globals: scripts run with `env` as their environment.
-- Their metatables are read-only too, and setmetatable/rawset refuse them.
local protected = setmetatable({}, {__mode = 'k'})
local function refuse() error('Attempt to modify a readonly table', 2) end
local function protect(view, mt)
  local mt_view = setmetatable({}, {__index = mt, __newindex = refuse, __metatable = false})
  protected[mt_view] = true
  mt.__metatable = mt_view
  protected[view] = true
  return setmetatable(view, mt)
end
local function readonly(t)
  return protect({}, {__index = t, __newindex = refuse})
end
real.setmetatable = function(t, mt)
  if protected[t] then error('Attempt to modify a readonly table', 2) end
  return setmetatable(t, mt)
end
real.rawset = function(t, k, v)
  if protected[t] then error('Attempt to modify a readonly table', 2) end
  return rawset(t, k, v)
end
local views = {}
for _, n in ipairs({'string', 'table', 'math', 'redis', 'cjson', 'cmsgpack', 'struct', 'bit', 'coroutine'}) do
  if real[n] then views[n] = readonly(real[n]) end
end
-- While a library loads, its code sees only `redis` with register_function, log and the constants.
local load_api = {register_function = register_function, log = redis.log,
                  LOG_DEBUG = 0, LOG_VERBOSE = 1, LOG_NOTICE = 2, LOG_WARNING = 3,
                  REDIS_VERSION = redis.REDIS_VERSION, REDIS_VERSION_NUM = redis.REDIS_VERSION_NUM}
local load_redis = protect({}, {
  __index = function(_, k)
    local v = load_api[k]
    if v ~= nil then return v end
    error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
  end,
  __newindex = refuse,
})
local env = protect({}, {
  __index = function(_, k)
    if H.loading then
      if k == 'redis' then return load_redis end
      error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
    end
    local v = views[k]
    if v ~= nil then return v end
    v = rawget(real, k)
    if v ~= nil then return v end
    error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
  end,
  __newindex = refuse,
})
real._G = env
H.env = env

-- Text chunks only, in the sandbox; a binary chunk loads as nothing.
real.loadstring = function(s, name)
  if type(s) == 'string' and ssub(s, 1, 1) == '\27' then
    return nil, 'binary chunks are not allowed'
  end
  local f, err = raw_loadstring(s, name)
  if f then setfenv(f, env) end
  return f, err
end

-- The error handler (Rust: no hook fires inside it): every failure becomes {err=..., source=..., line=...}
-- naming the user's code.
local handler = H.handler

-- Runs an EVAL script (KEYS and ARGV as globals) or a function (keys and args as arguments).
function H.run(f, keys, args, isfn)
  if isfn then
    return xpcall(function() return f(keys, args) end, handler)
  end
  real.KEYS = keys
  real.ARGV = args
  return xpcall(f, handler)
end

-- Runs a library's code while H.loading collects its functions.
function H.load(f)
  return xpcall(f, handler)
end
