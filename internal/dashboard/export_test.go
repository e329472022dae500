package dashboard

// PagePaths are the paths of the pages a company of kind sees, in the navigation's order:
// the browser checks visit every page the dashboard declares, including ones added later.
func PagePaths(kind string) map[string]string {
	out := map[string]string{}
	for _, p := range pages {
		if p.visibleTo(kind) {
			out[p.Name] = p.Path
		}
	}
	return out
}
