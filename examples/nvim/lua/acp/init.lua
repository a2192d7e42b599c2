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
--- Counters and the host's stderr, for diagnostics (never shown in the message area).
M.stats = { chunks = 0, turns = 0, banners = 0, permissions = 0 }
M.stderr = {}

local channel = nil
local buffer = nil
local streaming = false -- the last line is an agent answer still arriving
local connect_line = 0 -- where the buffer ended when :AcpConnect ran (restored history goes there)
local exiting = false

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
      vim.cmd('redrawstatus')
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
  append({ '── ' .. text .. ' ──' })
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

local function render_history(history)
  local lines = {}
  for _, message in ipairs(history) do
    vim.list_extend(lines, message_lines(message[1], message[2]))
  end
  if #lines > 0 then
    append(lines)
  end
end

-- -- what the host tells us ---------------------------------------------------------------------------------

local handlers = {}

function handlers.connecting(url)
  M.url = url
  M.state = 'connecting'
end

function handlers.connected(url, session, history, restored, transport)
  M.url, M.session = url, session
  if restored and #history > 0 then
    -- Above the banners of this connection's own recovery: the conversation came first.
    local lines = { '── restored from the store: session ' .. session .. ' (' .. #history .. ' messages) ──' }
    for _, message in ipairs(history) do
      vim.list_extend(lines, message_lines(message[1], message[2]))
    end
    M.stats.banners = M.stats.banners + 1
    edit(function(buf)
      local empty = api.nvim_buf_line_count(buf) == 1 and api.nvim_buf_get_lines(buf, 0, 1, false)[1] == ''
      api.nvim_buf_set_lines(buf, connect_line, empty and -1 or connect_line, false, lines)
    end)
  end
  banner('connected to ' .. url .. ' (' .. transport .. '): session ' .. session)
end

function handlers.switched(session, history)
  M.session = session
  banner('switched to session ' .. session .. ' (' .. #history .. ' messages)')
  render_history(history)
end

function handlers.state(text, _)
  M.state = text
end

function handlers.chunk(_, text)
  M.stats.chunks = M.stats.chunks + 1
  stream(text)
end

function handlers.turn_end(_, stop_reason)
  M.stats.turns = M.stats.turns + 1
  streaming = false
  if stop_reason ~= 'end_turn' then
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
    vim.cmd('redrawstatus')
  end
end

-- -- commands ----------------------------------------------------------------------------------------------------

function M.connect(url)
  local chan = start_host()
  if not chan then
    return
  end
  show_conversation()
  local buf = conversation()
  local empty = api.nvim_buf_line_count(buf) == 1 and api.nvim_buf_get_lines(buf, 0, 1, false)[1] == ''
  connect_line = empty and 0 or api.nvim_buf_line_count(buf)
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
      return record.id .. title .. ' (' .. record.cwd .. ', last used ' .. record.last_used .. ')'
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
  if channel then
    pcall(vim.rpcrequest, channel, 'shutdown')
  end
end

--- The status line item: `set statusline+=%{v:lua.require'acp'.statusline()}`.
function M.statusline()
  if not channel and M.state == 'disconnected' then
    return ''
  end
  return 'ACP ' .. M.state
end

--- The conversation buffer's number (created on first use).
function M.buffer()
  return conversation()
end

return M
