package httpapi

import (
	"context"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/partnerstream/partnerstream/internal/conversions"
	"github.com/partnerstream/partnerstream/internal/export"
	"github.com/partnerstream/partnerstream/internal/stats"
)

// ConversionExporter reads the rows of the conversion, commission and payout files
// (conversions.Service).
type ConversionExporter interface {
	ConversionRows(ctx context.Context, v conversions.Viewer, f conversions.Filter) (*conversions.Rows[conversions.Conversion], error)
	CommissionRows(ctx context.Context, v conversions.Viewer, f conversions.Filter) (*conversions.Rows[conversions.Commission], error)
	PayoutTotals(ctx context.Context, v conversions.Viewer, f conversions.PayoutFilter) (*conversions.Rows[conversions.PayoutTotal], error)
	// Names are the names the statistics file writes beside the ids.
	Names(ctx context.Context, v conversions.Viewer) (conversions.Names, error)
}

// StatsExporter reads the rows of the statistics file (stats.Service).
type StatsExporter interface {
	Resolve(p stats.Params) (stats.Params, error)
	Rows(ctx context.Context, scope stats.Scope, p stats.Params) (*stats.Rows, error)
}

// MountExports adds the CSV files: each list's route with .csv appended, with the list's
// filters, in the families that list is in, and payouts in all three (docs/exports.md).
func (s *Server) MountExports(cnv ConversionExporter, st StatsExporter) {
	h := exportHandlers{s: s, cnv: cnv, st: st}
	for _, prefix := range []string{prefixV1, prefixAPI} {
		s.app.Get(prefix+"conversions.csv", filtered(h, "conversions.csv", export.Conversions, h.conversionRows))
	}
	for _, prefix := range []string{prefixV1, prefixPartner, prefixAPI} {
		s.app.Get(prefix+"commissions.csv", filtered(h, "commissions.csv", export.Commissions, h.commissionRows))
		s.app.Get(prefix+"payouts.csv", h.payouts)
		s.app.Get(prefix+"stats.csv", h.stats)
	}
}

type exportHandlers struct {
	s   *Server
	cnv ConversionExporter
	st  StatsExporter
}

// serve streams the file; open's errors (the domain's) become problems by problem.
func serve[T any, C export.Cursor[T]](h exportHandlers, c *fiber.Ctx, name string, t export.Table[T],
	open func(context.Context) (C, error), problem func(error) error) error {
	err := export.Serve(c, h.s.log.With("request_id", RequestID(c)), name, t, func(ctx context.Context) (export.Cursor[T], error) {
		cur, err := open(ctx)
		if err != nil {
			return nil, err // not cur: a nil pointer in an interface is not nil
		}
		return cur, nil
	})
	if err != nil {
		return problem(err)
	}
	return nil
}

// conversionRows and commissionRows are the exporter's methods, read when a request comes
// (a server mounted without an exporter still has the routes).
func (h exportHandlers) conversionRows(ctx context.Context, v conversions.Viewer, f conversions.Filter) (*conversions.Rows[conversions.Conversion], error) {
	return h.cnv.ConversionRows(ctx, v, f)
}

func (h exportHandlers) commissionRows(ctx context.Context, v conversions.Viewer, f conversions.Filter) (*conversions.Rows[conversions.Commission], error) {
	return h.cnv.CommissionRows(ctx, v, f)
}

// filtered is the handler of a file with the conversion list's filters.
func filtered[T any](h exportHandlers, name string, t export.Table[T],
	rows func(context.Context, conversions.Viewer, conversions.Filter) (*conversions.Rows[T], error)) fiber.Handler {
	return func(c *fiber.Ctx) error {
		f, err := conversionsFilter(c)
		if err != nil {
			return err
		}
		v := conversionsViewer(c)
		return serve(h, c, name, t, func(ctx context.Context) (*conversions.Rows[T], error) {
			return rows(ctx, v, f)
		}, func(err error) error { return conversionsProblem(c, err) })
	}
}

func (h exportHandlers) payouts(c *fiber.Ctx) error {
	f, err := payoutFilter(c)
	if err != nil {
		return err
	}
	v := conversionsViewer(c)
	return serve(h, c, "payouts.csv", export.Payouts, func(ctx context.Context) (*conversions.Rows[conversions.PayoutTotal], error) {
		return h.cnv.PayoutTotals(ctx, v, f)
	}, func(err error) error { return conversionsProblem(c, err) })
}

func (h exportHandlers) stats(c *fiber.Ctx) error {
	p, _, err := statsRequest(c, h.st)
	if err != nil {
		return err
	}
	// The rows outlive the handler, and Fiber's query values point into the request's buffer.
	p.Currency = strings.Clone(p.Currency)
	scope := statsScope(c)
	var names conversions.Names
	if export.StatsNamed(p.GroupBy) {
		if names, err = h.cnv.Names(c.UserContext(), conversionsViewer(c)); err != nil {
			return conversionsProblem(c, err)
		}
	}
	return serve(h, c, "stats-"+string(p.GroupBy)+".csv", export.Stats(p.GroupBy, names), func(ctx context.Context) (*stats.Rows, error) {
		return h.st.Rows(ctx, scope, p)
	}, statsProblem)
}
