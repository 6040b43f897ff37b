"""TOOLS: the Sidekick seed's worker. The model is given OpenAI function tools (browser, Python,
files, Wikipedia, web search, notifications, and the tools of configured MCP servers) and calls
them in a bounded loop until it answers.

    worker.py          the worker kind: prompt, loop, result
    loop.py            the tool loop as plain logic (a chat function and a toolbox in)
    toolbox.py         tool definitions, argument validation, dispatch, errors as tool results
    catalog.py         the tools, bound to the clients they use
    browser.py         Playwright + headless Chromium (one browser per process)
    python_sandbox.py  code in a limited, network-less child process (bubblewrap)
    bwrap.py           one bubblewrap container: command line, limits, why a run stopped
    seccomp.py         the system calls that sandbox refuses
    files.py           a per-session sandbox folder
    wikipedia.py       the MediaWiki Action API
    websearch.py       Brave Search
    notify.py          Pushover, at most once per tool call id
    mcp_config.py      SIDEKICK_MCP_CONFIG: the `mcpServers` file
    mcp_link.py        one MCP server kept connected (official SDK): tools, calls, reconnects
    mcp_transport.py   under a link: the read stream watched, stderr kept short, SDK logs
    mcp_tools.py       the servers' tools as the model sees them: names, schemas, results
"""
