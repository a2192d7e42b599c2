-- The front end of the acp_client Neovim plugin (see docs/editor-plugin.md).
--
-- Lua owns everything the user sees: the conversation buffer, the prompt buffer, the status line item, the
-- permission question (vim.ui.select) and the messages. The agent connection lives in a Python host process
-- (host/acp_host.py, on acp_client's SyncAcpClient) started as an RPC job. Lua talks to it with
-- rpcnotify (connect, prompt, permission answers: nothing waits on the agent) and rpcrequest (quick
-- questions answered by the host itself: info, sessions, shutdown); the host calls back M._on(...).
--
-- Settings (all optional): g:acp_python (the interpreter that has acp_client and pynvim; default python3),
-- g:acp_store (a session store file: sessions and their conversation survive a restart of Neovim),
-- g:acp_url (connect at startup), g:acp_cwd (the new session's directory; default the current one),
-- g:acp_log (the host's log file), g:acp_retry (RetryPolicy knobs, e.g. {initial_delay = 0.2}).
local M = {}

local api = vim.api

--- What the status line shows, and what the tests read.
M.state = 'disconnected'
M.session = nil
M.url = nil
--- While reconnecting: the attempt, and when the next one starts (vim.uv.now() milliseconds).
M.attempt = nil
M.retry_at = nil
--- Counters and the host's stderr, for diagnostics (never shown in the message area).
M.stats = { chunks = 0, turns = 0, banners = 0, permissions = 0 }
M.stderr = {}

local channel = nil
local buffer = nil
local streaming = false -- the last line is an agent answer still arriving
local exiting = false
--- Sessions whose conversation the buffer shows (by every id it had): a reconnect never shows it again.
local shown = {}
--- Sessions whose "the agent lost the conversation above" divider the buffer shows already.
local divided = {}
local ticker = nil -- redraws the status lines while the countdown to the next attempt runs
local uv = vim.uv or vim.loop

--- Redraw the status line of every window (not only the current one's).
local function redraw_status()
  vim.cmd('redrawstatus!')
end

local function host_script()
  local here = debug.getinfo(1, 'S').source:sub(2) -- .../lua/acp/init.lua
  return vim.fn.fnamemodify(here, ':p:h:h:h') .. '/host/acp_host.py'
end

local function error_message(text)
  vim.notify('ACP: ' .. text, vim.log.levels.ERROR)
end

local function start_host()
  if channel then
    return channel
  end
  local python = vim.g.acp_python or 'python3'
  local log = vim.g.acp_log or (vim.fn.stdpath('cache') .. '/acp-host.log')
  local job = vim.fn.jobstart({ python, host_script() }, {
    rpc = true,
    env = { ACP_NVIM_LOG = log },
    on_stderr = function(_, data)
      for _, line in ipairs(data) do
        if line ~= '' then
          table.insert(M.stderr, line)
        end
      end
    end,
    on_exit = function(_, code)
      channel = nil
      M.state = 'disconnected'
      M.attempt, M.retry_at = nil, nil -- the countdown's timer stops at its next tick
      redraw_status()
      if code ~= 0 and not exiting then
        error_message('the plugin host exited (status ' .. code .. '); see ' .. log)
      end
    end,
  })
  if job <= 0 then
    error_message('cannot start the plugin host with ' .. python)
    return nil
  end
  channel = job
  return channel
end

-- -- the conversation buffer ---------------------------------------------------------------------------------

local function conversation()
  if buffer and api.nvim_buf_is_valid(buffer) then
    return buffer
  end
  buffer = api.nvim_create_buf(true, true)
  shown, divided = {}, {} -- a new buffer shows nothing yet
  api.nvim_buf_set_name(buffer, 'acp://conversation')
  vim.bo[buffer].filetype = 'acp'
  vim.bo[buffer].modifiable = false
  return buffer
end

local function show_conversation()
  local buf = conversation()
  if vim.fn.bufwinid(buf) == -1 then
    vim.cmd('botright vsplit')
    api.nvim_win_set_buf(0, buf)
    vim.wo.wrap = true
    vim.cmd('wincmd p')
  end
end

local function edit(fn)
  local buf = conversation()
  vim.bo[buf].modifiable = true
  fn(buf)
  vim.bo[buf].modifiable = false
  local last = api.nvim_buf_line_count(buf)
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    api.nvim_win_set_cursor(win, { last, 0 })
  end
end

local function append(lines)
  streaming = false
  edit(function(buf)
    local count = api.nvim_buf_line_count(buf)
    if count == 1 and api.nvim_buf_get_lines(buf, 0, 1, false)[1] == '' then
      api.nvim_buf_set_lines(buf, 0, 1, false, lines)
    else
      api.nvim_buf_set_lines(buf, -1, -1, false, lines)
    end
  end)
end

local function banner(text)
  M.stats.banners = M.stats.banners + 1
  -- One line, always: the host sends printable text; a line break still never reaches set_lines.
  append({ '── ' .. text:gsub('[\r\n]', ' ') .. ' ──' })
end

local function message_lines(role, text)
  local labels = { user = 'You: ', agent = 'Agent: ', inserted = 'Agent (in its replay): ' }
  local label = labels[role] or (role .. ': ')
  local lines = vim.split(text, '\n', { plain = true })
  lines[1] = label .. lines[1]
  return lines
end

local function stream(text)
  local parts = vim.split(text, '\n', { plain = true })
  if not streaming then
    append(message_lines('agent', text))
    streaming = true
    return
  end
  edit(function(buf)
    local last = api.nvim_buf_line_count(buf)
    local line = api.nvim_buf_get_lines(buf, last - 1, last, false)[1]
    parts[1] = line .. parts[1]
    api.nvim_buf_set_lines(buf, last - 1, last, false, parts)
  end)
end

local function lost_divider(turns)
  local count = turns == 1 and '1 turn' or (turns .. ' turns')
  return '── the agent lost the conversation above (' .. count .. '); the new session starts below ──'
end

--- The lines of a conversation: each message, and a divider after a part the agent lost.
local function history_lines(session, history)
  local lines = {}
  for _, message in ipairs(history) do
    if message[1] == 'lost' then
      table.insert(lines, lost_divider(message[2]))
      divided[session] = true
    else
      vim.list_extend(lines, message_lines(message[1], message[2]))
    end
  end
  return lines
end

local function messages_in(history)
  local count = 0
  for _, message in ipairs(history) do
    if message[1] ~= 'lost' then
      count = count + 1
    end
  end
  return count
end

local function mark_shown(session, earlier)
  shown[session] = true
  for _, id in ipairs(earlier or {}) do
    shown[id] = true
  end
end

local function is_shown(session, earlier)
  if shown[session] then
    return true
  end
  for _, id in ipairs(earlier or {}) do
    if shown[id] then
      return true
    end
  end
  return false
end

local function stop_ticker()
  if ticker then
    ticker:stop()
    ticker:close()
    ticker = nil
  end
end

local function start_ticker()
  if ticker then
    return
  end
  ticker = uv.new_timer()
  ticker:start(250, 250, vim.schedule_wrap(function()
    if exiting then
      return
    end
    if M.retry_at == nil then
      stop_ticker()
    end
    redraw_status()
  end))
end

-- -- what the host tells us ---------------------------------------------------------------------------------

local handlers = {}

function handlers.connecting(url)
  M.url = url
  M.state = 'connecting'
end

function handlers.connected(url, session, history, restored, transport, earlier)
  M.url, M.session = url, session
  banner('connected to ' .. url .. ' (' .. transport .. '): session ' .. session)
  -- A stored conversation, unless this editor shows it already (a reconnect after :AcpDisconnect):
  -- never twice. The banners of its recovery follow.
  if restored and #history > 0 and not is_shown(session, earlier) then
    M.stats.banners = M.stats.banners + 1
    local lines = {
      '── restored from the store: session ' .. session .. ' (' .. messages_in(history) .. ' messages) ──',
    }
    append(vim.list_extend(lines, history_lines(session, history)))
  end
  mark_shown(session, earlier)
end

function handlers.switched(session, history, earlier)
  M.session = session
  banner('switched to session ' .. session .. ' (' .. messages_in(history) .. ' messages)')
  local lines = history_lines(session, history)
  if #lines > 0 then
    append(lines)
  end
  mark_shown(session, earlier)
end

function handlers.state(state, attempt, retry_in)
  M.state = state
  if (state == 'reconnecting' or state == 'suspended') and retry_in ~= vim.NIL and retry_in ~= nil then
    M.attempt = attempt ~= vim.NIL and attempt or nil
    M.retry_at = uv.now() + math.floor(retry_in * 1000)
    start_ticker()
  else
    M.attempt, M.retry_at = nil, nil
    stop_ticker()
  end
end

--- The agent lost a session: its conversation stays above a divider; the new session continues below.
function handlers.lost(previous, session, turns, line)
  banner(line)
  if session == M.session or previous == M.session then
    M.session = session
  end
  if shown[previous] and not divided[session] then
    append({ lost_divider(turns) })
    divided[session] = true
  end
  if shown[previous] then
    shown[session] = true
  end
end

function handlers.chunk(_, text)
  M.stats.chunks = M.stats.chunks + 1
  stream(text)
end

function handlers.turn_end(_, stop_reason)
  M.stats.turns = M.stats.turns + 1
  streaming = false
  if stop_reason ~= 'end_turn' and stop_reason ~= 'cut' then -- 'cut': its banner was said already
    banner('turn ended: ' .. stop_reason)
  end
end

function handlers.turn_failed(_, message)
  streaming = false
  banner('the turn failed: ' .. message)
end

function handlers.banner(_, line)
  banner(line)
end

function handlers.permission(id, title, options)
  M.stats.permissions = M.stats.permissions + 1
  vim.ui.select(options, {
    prompt = title,
    format_item = function(option)
      return option[2]
    end,
    kind = 'acp.permission',
  }, function(choice)
    if channel then
      vim.rpcnotify(channel, 'permission', id, choice and choice[1] or vim.NIL)
    end
  end)
end

function handlers.error(message)
  error_message(message)
end

--- Called by the host (through nvim_exec_lua) for each thing it reports.
function M._on(what, ...)
  local handler = handlers[what]
  if handler then
    handler(...)
    redraw_status()
  end
end

-- -- commands ----------------------------------------------------------------------------------------------------

function M.connect(url)
  local chan = start_host()
  if not chan then
    return
  end
  show_conversation()
  local store = vim.g.acp_store and vim.fn.expand(vim.g.acp_store) or nil
  if store then -- the store creates its file, not a missing directory: the plugin's state directory is ours
    vim.fn.mkdir(vim.fn.fnamemodify(store, ':h'), 'p')
  end
  local options = {
    store = store,
    cwd = vim.g.acp_cwd or vim.fn.getcwd(),
    retry = vim.g.acp_retry,
  }
  vim.rpcnotify(chan, 'connect', url, options)
end

function M.prompt(text)
  if not channel or not M.session then
    error_message('not connected (:AcpConnect URL)')
    return
  end
  append(message_lines('user', text))
  vim.rpcnotify(channel, 'prompt', text)
end

function M.prompt_buffer()
  local buf = api.nvim_create_buf(false, true)
  vim.bo[buf].buftype = 'prompt'
  vim.fn.prompt_setprompt(buf, 'acp> ')
  vim.fn.prompt_setcallback(buf, function(text)
    vim.schedule(function() -- nothing to save: :qa must not ask (Neovim marks it after this callback)
      if api.nvim_buf_is_valid(buf) then
        vim.bo[buf].modified = false
      end
    end)
    if text ~= '' then
      M.prompt(text)
    end
  end)
  vim.cmd('belowright split')
  api.nvim_win_set_buf(0, buf)
  api.nvim_win_set_height(0, 3)
  vim.cmd('startinsert')
  return buf
end

function M.sessions()
  if not channel then
    error_message('no session store open (:AcpConnect URL with g:acp_store set)')
    return
  end
  local stored = vim.rpcrequest(channel, 'sessions')
  if #stored == 0 then
    error_message('the store holds no session for this agent')
    return
  end
  vim.ui.select(stored, {
    prompt = 'Stored sessions',
    format_item = function(record)
      local title = record.title ~= '' and (' ' .. record.title) or ''
      return record.shown_id .. title .. ' (' .. record.cwd .. ', last used ' .. record.last_used .. ')'
    end,
    kind = 'acp.sessions',
  }, function(choice)
    if choice and channel then
      vim.rpcnotify(channel, 'switch', choice.id)
    end
  end)
end

function M.disconnect()
  if channel then
    vim.rpcnotify(channel, 'disconnect')
  end
  M.session = nil
end

--- :AcpReconnect: while the client waits between attempts, try again now.
function M.reconnect()
  if not channel or M.state == 'disconnected' then
    error_message('not connected (:AcpConnect URL)')
    return
  end
  vim.rpcnotify(channel, 'reconnect')
  if M.retry_at then
    M.retry_at = uv.now()
    redraw_status()
  end
end

--- What the host knows (url, state, session, the stdio agent's pid, the host's pid), or nil.
function M.info()
  if not channel then
    return nil
  end
  return vim.rpcrequest(channel, 'info')
end

--- Close the connection and stop the host's threads before Neovim exits (VimLeavePre).
function M.shutdown()
  exiting = true
  stop_ticker() -- no status redraw while Neovim tears its windows down
  if channel then
    pcall(vim.rpcrequest, channel, 'shutdown')
  end
end

--- The status line item: `ACP connected`, `ACP reconnecting (attempt 3, retry in 4s)`... (empty when
--- the plugin was never used). Add it with M.add_to_statusline(), which keeps what the status line shows.
function M.statusline()
  if not channel and M.state == 'disconnected' then
    return ''
  end
  if M.retry_at then
    local left = math.ceil((M.retry_at - uv.now()) / 1000)
    local attempt = M.attempt and ('attempt ' .. M.attempt .. ', ') or ''
    local when = left > 0 and ('retry in ' .. left .. 's') or 'retrying now'
    return 'ACP ' .. M.state .. ' (' .. attempt .. when .. ', :AcpReconnect)'
  end
  return 'ACP ' .. M.state
end

--- The item for a 'statusline' option: %{...} of M.statusline().
M.statusline_item = "%{v:lua.require'acp'.statusline()}"

--- Add the ACP item to the status line without losing what it shows: to the user's own
--- 'statusline', or, when that is empty (Neovim's default status line), to a copy of the default
--- (file name, flags, position).
function M.add_to_statusline()
  local current = vim.o.statusline
  if current:find(M.statusline_item, 1, true) then
    return
  end
  if current == '' then
    current = '%<%f %h%m%r%=%-14.(%l,%c%V%) %P'
  end
  vim.o.statusline = current .. ' ' .. M.statusline_item
end

--- The conversation buffer's number (created on first use).
function M.buffer()
  return conversation()
end

return M
