package ingest

// reuse keeps a few slices (or blocks) of a kind for the next batch: ingest moves every click
// through several buffers the size of a batch, and allocating them afresh for each batch made
// the garbage collector a fifth of ingest's CPU.
type reuse[T any] chan T

func newReuse[T any](n int) reuse[T] { return make(chan T, n) }

// get returns a kept value, or the zero value when none is kept.
func (r reuse[T]) get() (v T) {
	select {
	case v = <-r:
	default:
	}
	return v
}

// put keeps v unless enough are kept already. The caller must not use v any more, and must
// have cleared what v refers to that should not outlive it.
func (r reuse[T]) put(v T) {
	select {
	case r <- v:
	default:
	}
}
