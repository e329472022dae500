package export

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime/debug"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
)

// ContentType is the media type of every file.
const ContentType = "text/csv; charset=utf-8"

// Serve answers c with the CSV file of the rows open returns, streamed. log should carry the
// request's id: it records a stream cut short.
//
// open runs and the first row is read before anything is sent, so a refused filter, an
// unreachable store or a failing query is returned here and the caller answers the usual
// JSON problem. Once the first byte is out the status is 200: a failure after it is logged
// and the body is ended with an error, on which fasthttp closes the connection without the
// last chunk of the chunked body, so the client sees a cut transfer, never a short file
// that looks complete.
//
// The rows are written by a goroutine of this request, into a pipe that fasthttp reads as
// it sends the response, after the handler has returned: nothing there touches c. The pipe
// holds nothing: a write waits until fasthttp has taken it, so a slow client slows the
// cursor down instead of filling memory. The query's context outlives the handler and ends
// with the stream (when the client goes away, fasthttp closes the pipe and the next write
// fails). The server's write timeout bounds each stretch between two flushes instead of the
// whole file.
func Serve[T any](c *fiber.Ctx, log *slog.Logger, filename string, t Table[T], open func(context.Context) (Cursor[T], error)) error {
	ctx, cancel := context.WithCancel(context.WithoutCancel(c.UserContext()))
	cur, err := open(ctx)
	if err != nil {
		cancel()
		return err
	}
	first := cur.Next()
	if !first {
		if err := cur.Err(); err != nil {
			cur.Close()
			cancel()
			return err
		}
	}
	c.Set(fiber.HeaderContentType, ContentType)
	c.Set(fiber.HeaderContentDisposition, fmt.Sprintf(`attachment; filename="%s"`, filename))
	c.Set(fiber.HeaderCacheControl, "no-store")
	conn, timeout := c.Context().Conn(), c.App().Config().WriteTimeout
	log = log.With("path", strings.Clone(c.Path()), "file", filename)
	pr, pw := io.Pipe()
	c.Context().SetBodyStream(pr, -1)
	go func() {
		// Cancel before Close: closing a result read halfway would otherwise read (and drop)
		// the rest of it from the store.
		defer cur.Close()
		defer cancel()
		defer func() {
			if r := recover(); r != nil {
				log.Error("export: panic while streaming", "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
				_ = pw.CloseWithError(fmt.Errorf("export: panic: %v", r))
			}
		}()
		w := bufio.NewWriterSize(pw, bufferSize)
		n, err := write(w, t, cur, first, func() { extend(conn, timeout) })
		if err != nil {
			log.Error("export: cut after rows", "rows", n, "err", err)
			_ = pw.CloseWithError(err)
			return
		}
		_ = pw.Close()
	}()
	return nil
}

// bufferSize is the most one export holds before handing bytes to fasthttp.
const bufferSize = 32 << 10

// extend moves the connection's write deadline, which fasthttp set once for the whole
// response, to timeout from now. It must run before a flush: the flush is what writes.
func extend(conn net.Conn, timeout time.Duration) {
	if conn != nil && timeout > 0 {
		_ = conn.SetWriteDeadline(time.Now().Add(timeout))
	}
}
