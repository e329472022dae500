package enrich

import (
	"strings"

	"github.com/medama-io/go-useragent"
	"github.com/medama-io/go-useragent/agents"
)

// Device types of the clicks table.
const (
	DeviceDesktop = "desktop"
	DeviceMobile  = "mobile"
	DeviceTablet  = "tablet"
	DeviceBot     = "bot"
	DeviceOther   = "other"
)

// Device is what a user agent says about the visitor's device.
type Device struct {
	Type    string // one of the Device... constants
	Browser string // the browser's family ("Chrome", "Safari", "Samsung Browser"), empty when unknown
	OS      string // the OS family ("Windows", "iOS", "Android", "MacOS"), empty when unknown
}

// deviceParser is medama-io/go-useragent: a trie of user-agent tokens built once, parsing in
// well under a microsecond without allocating, and maintained (it serves Medama's
// analytics). uap-go's regular expressions are the reference for correctness but cost tens
// of microseconds for a user agent seen for the first time; mileusna/useragent allocates a
// dozen times per parse. docs/tracking.md compares them.
type deviceParser struct{ p *useragent.Parser }

func newDeviceParser() *deviceParser { return &deviceParser{p: useragent.NewParser()} }

var deviceTypes = map[agents.Device]string{
	agents.DeviceDesktop: DeviceDesktop,
	agents.DeviceMobile:  DeviceMobile,
	agents.DeviceTablet:  DeviceTablet,
	agents.DeviceBot:     DeviceBot,
}

func (d *deviceParser) parse(ua string) *Device {
	a := d.p.Parse(ua)
	dev := &Device{Type: DeviceOther, Browser: string(a.Browser()), OS: string(a.OS())}
	if t, ok := deviceTypes[a.Device()]; ok {
		dev.Type = t
	}
	// The parser takes every Android device for a phone. Android's browsers send "Mobile" on
	// phones only (Chrome's and Android's own convention for telling the two apart), so an
	// Android user agent without it is a tablet's: a Galaxy Tab's Chrome says
	// "Linux; Android 13; SM-X700 ... Safari/537.36".
	if dev.Type == DeviceMobile && a.OS() == agents.OSAndroid && !strings.Contains(ua, "Mobile") {
		dev.Type = DeviceTablet
	}
	return dev
}

// unknownDevice is the device of an empty user agent.
var unknownDevice = &Device{Type: DeviceOther}

func (s *Session) device(ua string) *Device {
	if ua == "" {
		return unknownDevice
	}
	if d, ok := s.devices.get(ua); ok {
		return d
	}
	d := s.e.devices.parse(ua)
	s.devices.put(ua, d)
	return d
}
