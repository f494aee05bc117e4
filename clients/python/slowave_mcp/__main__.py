from slowave_mcp.server import main

main()
