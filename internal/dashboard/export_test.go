package dashboard

// PagePaths are the pages a company of kind sees, as name and path, in the navigation's
// order: the browser checks visit every page the dashboard declares, ones added later too.
func PagePaths(kind string) [][2]string {
	var out [][2]string
	for _, p := range pages {
		if p.visibleTo(kind) {
			out = append(out, [2]string{p.Name, p.Path})
		}
	}
	return out
}
