package gateway

// LiveSessions is how many /mcp sessions the gateway counts as live.
func LiveSessions(g *Gateway) int {
	_, all := g.sessions.count("")
	return all
}
