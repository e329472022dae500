package journey

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// scrape reads a component's /metrics and sums each metric's samples over their labels.
func (s *stack) scrape(component string) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.metrics[component]+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", component, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 8192))
		return nil, fmt.Errorf("scrape %s: %s: %s", component, resp.Status, b)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		if sp < 0 {
			continue
		}
		name := line[:sp]
		if i := strings.IndexByte(name, '{'); i >= 0 {
			name = name[:i]
		}
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			continue
		}
		out[name] += v
	}
	return out, sc.Err()
}

// clickCounters formats the api's click recording counters (since its last start).
func (s *stack) clickCounters() string {
	m, err := s.scrape("api")
	if err != nil {
		return firstLine(err.Error())
	}
	return fmt.Sprintf("api click counters since its last start: recorded %.0f, spooled %.0f, replayed %.0f, dropped %.0f",
		m["partnerstream_clicks_recorded_total"], m["partnerstream_clicks_spooled_total"],
		m["partnerstream_clicks_replayed_total"], m["partnerstream_clicks_dropped_total"])
}
