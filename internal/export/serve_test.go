package export

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
)

// gatedCursor yields its values; before each value after the first it waits for gate (when
// set) and then for delay.
type gatedCursor struct {
	sliceCursor[item]
	gate  chan struct{}
	delay time.Duration
}

func (c *gatedCursor) Next() bool {
	if c.i > 0 {
		if c.gate != nil {
			<-c.gate
		}
		time.Sleep(c.delay)
	}
	return c.sliceCursor.Next()
}

// serveOne runs a server whose only route exports cur, with the write timeout, and returns
// its URL.
func serveOne(t *testing.T, writeTimeout time.Duration, open func(context.Context) (Cursor[item], error)) string {
	t.Helper()
	app := fiber.New(fiber.Config{WriteTimeout: writeTimeout, DisableStartupMessage: true})
	app.Get("/x.csv", func(c *fiber.Ctx) error {
		return Serve(c, slog.New(slog.DiscardHandler), "x.csv", items, open)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = app.Listener(ln) }()
	t.Cleanup(func() { _ = app.Shutdown() })
	return "http://" + ln.Addr().String() + "/x.csv"
}

func TestServeSendsTheFirstRowBeforeTheCursorEnds(t *testing.T) {
	gate := make(chan struct{})
	url := serveOne(t, time.Second, func(context.Context) (Cursor[item], error) {
		return &gatedCursor{sliceCursor: sliceCursor[item]{vals: []item{{"first", "1"}, {"second", "2"}}}, gate: gate}, nil
	})
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != ContentType || resp.Header.Get("Content-Disposition") != `attachment; filename="x.csv"` {
		t.Fatalf("%d %v", resp.StatusCode, resp.Header)
	}
	// The second row waits for the gate: the header and first row must arrive without it.
	br := bufio.NewReader(resp.Body)
	for _, want := range []string{"text,amount\n", "first,1\n"} {
		line, err := br.ReadString('\n')
		if err != nil || line != want {
			t.Fatalf("read %q, %v; want %q", line, err, want)
		}
	}
	close(gate)
	rest, err := io.ReadAll(br)
	if err != nil || string(rest) != "second,2\n" {
		t.Fatalf("rest %q, %v", rest, err)
	}
}

func TestServeOutlastsTheWriteTimeoutWhileRowsKeepComing(t *testing.T) {
	// Six rows 150 ms apart take about three times the server's write timeout.
	url := serveOne(t, 300*time.Millisecond, func(context.Context) (Cursor[item], error) {
		vals := make([]item, 6)
		for i := range vals {
			vals[i] = item{"row", "1"}
		}
		return &gatedCursor{sliceCursor: sliceCursor[item]{vals: vals}, delay: 150 * time.Millisecond}, nil
	})
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || strings.Count(string(body), "row,1\n") != 6 {
		t.Fatalf("%q, %v; want all six rows", body, err)
	}
}

func TestServeCutsTheConnectionWhenTheCursorFailsMidStream(t *testing.T) {
	url := serveOne(t, time.Second, func(context.Context) (Cursor[item], error) {
		return &sliceCursor[item]{vals: []item{{"a", "1"}, {"b", "2"}}, err: errors.New("the store went away")}, nil
	})
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if !errors.Is(err, io.ErrUnexpectedEOF) || !strings.HasPrefix(string(body), "text,amount\na,1\n") {
		t.Fatalf("%q, %v; want the rows so far and an unexpected EOF", body, err)
	}
}

func TestServeReturnsErrorsBeforeTheFirstByte(t *testing.T) {
	boom := errors.New("no store")
	for name, open := range map[string]func(context.Context) (Cursor[item], error){
		"open fails":      func(context.Context) (Cursor[item], error) { return nil, boom },
		"first row fails": func(context.Context) (Cursor[item], error) { return &sliceCursor[item]{err: boom}, nil },
	} {
		app := fiber.New()
		app.Get("/x.csv", func(c *fiber.Ctx) error {
			err := Serve(c, slog.New(slog.DiscardHandler), "x.csv", items, open)
			if !errors.Is(err, boom) {
				t.Errorf("%s: Serve = %v, want the store's error", name, err)
			}
			return c.Status(503).JSON(fiber.Map{"code": "unavailable"})
		})
		resp, err := app.Test(httptestRequest())
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 503 || resp.Header.Get("Content-Type") != fiber.MIMEApplicationJSON {
			t.Errorf("%s: %d %s, want the handler's own answer", name, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	}
}

func httptestRequest() *http.Request {
	req, _ := http.NewRequest("GET", "/x.csv", nil)
	return req
}
