-- The commands of the acp_client Neovim plugin (see docs/editor-plugin.md). The work is in lua/acp/init.lua
-- (the front end) and host/acp_host.py (the Python host on acp_client's SyncAcpClient).
if vim.g.loaded_acp then
  return
end
vim.g.loaded_acp = true

local command = vim.api.nvim_create_user_command

command('AcpConnect', function(opts)
  require('acp').connect(opts.args)
end, { nargs = 1, desc = 'Connect to an ACP agent: ws://..., http://... or stdio:COMMAND' })

command('AcpPrompt', function(opts)
  require('acp').prompt(opts.args)
end, { nargs = '+', desc = 'Send a prompt to the agent' })

command('AcpPromptBuffer', function()
  require('acp').prompt_buffer()
end, { nargs = 0, desc = 'Open a prompt buffer: each line you enter is sent' })

command('AcpSessions', function()
  require('acp').sessions()
end, { nargs = 0, desc = 'Pick a stored session to continue' })

command('AcpReconnect', function()
  require('acp').reconnect()
end, { nargs = 0, desc = 'While reconnecting: try again now instead of waiting for the countdown' })

command('AcpDisconnect', function()
  require('acp').disconnect()
end, { nargs = 0, desc = 'Close the connection to the agent' })

local group = vim.api.nvim_create_augroup('acp', { clear = true })
vim.api.nvim_create_autocmd('VimEnter', {
  group = group,
  callback = function()
    if vim.g.acp_url then -- restore the conversation when Neovim starts
      require('acp').connect(vim.g.acp_url)
    end
  end,
})
vim.api.nvim_create_autocmd('VimLeavePre', {
  group = group,
  callback = function()
    require('acp').shutdown()
  end,
})
