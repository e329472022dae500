package tracking

import (
	"hash/maphash"
	"strings"
	"sync/atomic"
)

// botMarkers are lowercase substrings of the user agents of crawlers, link-preview fetchers,
// uptime checkers and HTTP libraries. A click from one of them is still redirected (a preview
// that fails looks like a broken link to the affiliate) but flagged is_bot, so statistics
// and commissions can leave it out.
//
// The list is short on purpose: it catches the well-behaved bots that say what they are,
// which are most of the bot traffic a link sees. Bots that pretend to be browsers need
// behavioural detection, which is out of scope here. Generic words are limited to forms that
// do not occur in browser user agents ("bot/" and "bot;" rather than "bot", which would
// match phone models such as CUBOT), and app names only as their fetchers spell them: the
// in-app browsers of Pinterest or the Yandex app are people, "Pinterestbot" is not.
var botMarkers = []string{
	// generic self-descriptions
	"bot/", "bot;", "bot)", "crawler", "spider", "+http", "headless", "preview",
	// search engines and archives
	"googlebot", "bingbot", "slurp", "duckduckbot", "baiduspider", "yandexbot", "yandex.com/bots", "sogou", "exabot", "ia_archiver",
	"petalbot", "applebot", "seznambot",
	// social networks and messengers fetching previews
	"facebookexternalhit", "facebot", "twitterbot", "linkedinbot", "slackbot", "slack-imgproxy", "discordbot",
	"telegrambot", "whatsapp/", "pinterestbot", "redditbot", "embedly", "vkshare", "skypeuripreview",
	// SEO tools and AI crawlers
	"ahrefsbot", "semrushbot", "mj12bot", "dotbot", "bytespider", "gptbot", "chatgpt-user", "claudebot", "ccbot",
	"amazonbot", "perplexitybot",
	// HTTP libraries and command-line clients
	"curl/", "wget/", "python-requests", "python-urllib", "aiohttp", "go-http-client", "java/", "okhttp/",
	"apache-httpclient", "libwww-perl", "node-fetch", "axios/", "scrapy", "httpie", "postmanruntime",
	"phantomjs", "lighthouse", "pingdom", "uptimerobot", "statuscake",
}

var bots = newMatcher(botMarkers)

// IsBot reports whether a user agent belongs to a bot. An empty user agent counts as one:
// every browser sends one.
func IsBot(userAgent string) bool {
	return strings.TrimSpace(userAgent) == "" || botVerdicts.match(userAgent)
}

// botVerdicts remembers the matcher's answer for the user agents seen last: the visitors
// of a link send a few hundred distinct ones, and hashing one costs a tenth of scanning it.
var botVerdicts = verdictCache{seed: maphash.MakeSeed()}

// verdictCache is a direct-mapped cache of bots.match by a 64-bit hash of the text. Each
// entry packs the hash (its low bit cleared, bit 1 set so no entry is 0) with the answer
// in the low bit, in one atomic word: lock free, and a torn entry is impossible. Two texts
// share an answer only if their seeded hashes agree in 63 bits.
type verdictCache struct {
	seed    maphash.Seed
	entries [4096]atomic.Uint64
}

func (c *verdictCache) match(text string) bool {
	h := maphash.String(c.seed, text)
	tag := h&^1 | 2
	e := &c.entries[h>>(64-12)]
	if v := e.Load(); v&^1 == tag {
		return v&1 == 1
	}
	bot := bots.match(text)
	v := tag
	if bot {
		v |= 1
	}
	e.Store(v)
	return bot
}

// matcher finds any of a set of lowercase ASCII substrings in one pass over the text, case
// insensitively (an Aho-Corasick automaton): the redirect checks every user agent against
// every marker, and a search per marker was a large share of its own work.
type matcher struct {
	next [][128]uint16 // state x ASCII byte -> state, failure links folded in
	out  []bool        // a marker ends in this state (or in one of its suffixes)
}

func newMatcher(patterns []string) *matcher {
	m := &matcher{next: make([][128]uint16, 1), out: make([]bool, 1)}
	for _, p := range patterns {
		s := uint16(0)
		for i := 0; i < len(p); i++ {
			c := p[i]
			if c >= 0x80 || (c >= 'A' && c <= 'Z') {
				panic("tracking: bot marker " + p + " is not lowercase ASCII")
			}
			if m.next[s][c] == 0 {
				m.next = append(m.next, [128]uint16{})
				m.out = append(m.out, false)
				m.next[s][c] = uint16(len(m.next) - 1)
			}
			s = m.next[s][c]
		}
		m.out[s] = true
	}
	// Breadth first, so a state's failure link is final before its children need it.
	fail := make([]uint16, len(m.next))
	var queue []uint16
	for c := range 128 {
		if t := m.next[0][c]; t != 0 {
			queue = append(queue, t)
		}
	}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		m.out[s] = m.out[s] || m.out[fail[s]]
		for c := range 128 {
			if t := m.next[s][c]; t != 0 {
				fail[t] = m.next[fail[s]][c]
				queue = append(queue, t)
			} else {
				m.next[s][c] = m.next[fail[s]][c]
			}
		}
	}
	return m
}

func (m *matcher) match(text string) bool {
	s := uint16(0)
	for i := 0; i < len(text); i++ {
		c := text[i]
		if c >= 0x80 { // markers are ASCII: no match spans this byte
			s = 0
			continue
		}
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		s = m.next[s][c]
		if m.out[s] {
			return true
		}
	}
	return false
}
