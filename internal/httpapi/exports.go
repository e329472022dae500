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
		s.app.Get(prefix+"conversions.csv", h.conversions)
	}
	for _, prefix := range []string{prefixV1, prefixPartner, prefixAPI} {
		s.app.Get(prefix+"commissions.csv", h.commissions)
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

func (h exportHandlers) conversions(c *fiber.Ctx) error {
	f, err := conversionsFilter(c)
	if err != nil {
		return err
	}
	v := conversionsViewer(c)
	return serve(h, c, "conversions.csv", export.Conversions, func(ctx context.Context) (*conversions.Rows[conversions.Conversion], error) {
		return h.cnv.ConversionRows(ctx, v, f)
	}, func(err error) error { return conversionsProblem(c, err) })
}

func (h exportHandlers) commissions(c *fiber.Ctx) error {
	f, err := conversionsFilter(c)
	if err != nil {
		return err
	}
	v := conversionsViewer(c)
	return serve(h, c, "commissions.csv", export.Commissions, func(ctx context.Context) (*conversions.Rows[conversions.Commission], error) {
		return h.cnv.CommissionRows(ctx, v, f)
	}, func(err error) error { return conversionsProblem(c, err) })
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
	p, _, err := statsParams(c)
	if err != nil {
		return err
	}
	if p, err = h.st.Resolve(p); err != nil {
		return statsProblem(err)
	}
	// The rows outlive the handler, and Fiber's query values point into the request's buffer.
	p.Currency = strings.Clone(p.Currency)
	caller := Caller(c)
	scope := stats.Scope{CompanyID: caller.CompanyID, Kind: caller.CompanyKind}
	return serve(h, c, "stats-"+string(p.GroupBy)+".csv", export.Stats(p.GroupBy), func(ctx context.Context) (*stats.Rows, error) {
		return h.st.Rows(ctx, scope, p)
	}, statsProblem)
}
