package tracking

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// The spool is the click recorder's write-ahead log: where a click goes when Kafka did not
// acknowledge it in time, before the redirect is answered. It is a directory of append-only
// segment files named by a sequence number (00000000000000000001.wal, ...). Each record is
// a 4-byte big-endian length, a 4-byte CRC-32C of the payload, and the payload (a click as
// JSON).
//
// Appends are group-committed: concurrent appenders queue their records, one goroutine
// writes everything queued with a single write and a single fsync, then releases all of
// them. An append returns only once its record is on disk, so a click acknowledged from the
// spool survives a crash of the process or the machine.
//
// The replay loop reads whole sealed segments (never the one being written: it first asks
// for the active one to be sealed) and deletes a segment once Kafka has acknowledged every
// record in it. A crash can leave the last record of the last segment half written; its CRC
// (or its missing bytes) gives it away and reading stops there. That record was never
// acknowledged, since its fsync had not returned.
type spool struct {
	dir        string
	max        int64
	segmentMax int64
	unlock     func()

	mu      sync.Mutex
	queued  int64 // bytes of records waiting for the next commit
	disk    int64 // bytes of the segment files
	pending []byte
	spare   []byte
	group   *commitGroup
	closed  bool
	kick    chan struct{}
	done    chan struct{}

	// fileMu guards the active segment; the committer holds it while writing, so sealing
	// never cuts a commit in half.
	fileMu     sync.Mutex
	active     *os.File
	activeSize int64
	nextSeq    uint64

	onSize func(bytes int64)
}

// commitGroup is the records of one write and fsync; done closes when it is on disk.
type commitGroup struct {
	done chan struct{}
	err  error
}

// ErrSpoolFull is returned when the spool holds its maximum size: the click is dropped.
var ErrSpoolFull = errors.New("tracking: click spool is full")

var errSpoolClosed = errors.New("tracking: click spool is closed")

const (
	recordHeader = 8
	// maxRecord bounds a record's length on reading, so a corrupt length cannot make the
	// reader allocate gigabytes. A click is well under 8 KiB.
	maxRecord  = 1 << 20
	segmentExt = ".wal"
	lockName   = "spool.lock"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

type segment struct {
	seq  uint64
	path string
}

// openSpool opens (creating it if need be) the spool in dir, holding at most maxBytes, in
// segments of about segmentBytes. onSize, if set, hears every change of its size.
func openSpool(dir string, maxBytes, segmentBytes int64, onSize func(int64)) (*spool, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("spool: create %s: %w", dir, err)
	}
	unlock, err := lockDir(filepath.Join(dir, lockName))
	if err != nil {
		return nil, fmt.Errorf("spool: %s is in use by another process: %w", dir, err)
	}
	s := &spool{dir: dir, max: maxBytes, segmentMax: segmentBytes, unlock: unlock, nextSeq: 1,
		group: &commitGroup{done: make(chan struct{})}, kick: make(chan struct{}, 1), done: make(chan struct{}), onSize: onSize}
	segs, err := s.list()
	if err != nil {
		unlock()
		return nil, err
	}
	for _, seg := range segs {
		fi, err := os.Stat(seg.path)
		if err != nil {
			unlock()
			return nil, fmt.Errorf("spool: %w", err)
		}
		s.disk += fi.Size()
		s.nextSeq = seg.seq + 1
	}
	s.reportSize()
	go s.commit()
	return s, nil
}

// list returns the segment files in order.
func (s *spool) list() ([]segment, error) {
	des, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("spool: read %s: %w", s.dir, err)
	}
	var segs []segment
	for _, de := range des {
		name, ok := strings.CutSuffix(de.Name(), segmentExt)
		if !ok || de.IsDir() {
			continue
		}
		seq, err := strconv.ParseUint(name, 10, 64)
		if err != nil {
			continue
		}
		segs = append(segs, segment{seq: seq, path: filepath.Join(s.dir, de.Name())})
	}
	sort.Slice(segs, func(i, j int) bool { return segs[i].seq < segs[j].seq })
	return segs, nil
}

// Append writes the payloads as records and returns once they are on disk, or
// ErrSpoolFull without writing any of them when they do not fit.
func (s *spool) Append(payloads ...[]byte) error {
	var n int64
	for _, p := range payloads {
		n += int64(recordHeader + len(p))
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errSpoolClosed
	}
	if s.disk+s.queued+n > s.max {
		s.mu.Unlock()
		return ErrSpoolFull
	}
	for _, p := range payloads {
		s.pending = binary.BigEndian.AppendUint32(s.pending, uint32(len(p)))
		s.pending = binary.BigEndian.AppendUint32(s.pending, crc32.Checksum(p, castagnoli))
		s.pending = append(s.pending, p...)
	}
	s.queued += n
	g := s.group
	select {
	case s.kick <- struct{}{}:
	default: // a commit is already due and will take these records too
	}
	s.mu.Unlock()
	s.reportSize()
	<-g.done
	return g.err
}

// commit is the group-commit loop: everything queued since the last round goes out in one
// write and one fsync.
func (s *spool) commit() {
	defer close(s.done)
	for range s.kick {
		s.mu.Lock()
		buf, g := s.pending, s.group
		if len(buf) == 0 {
			s.mu.Unlock()
			continue
		}
		s.pending, s.group = s.spare[:0], &commitGroup{done: make(chan struct{})}
		s.mu.Unlock()

		err := s.write(buf)
		s.mu.Lock()
		s.queued -= int64(len(buf))
		s.spare = buf
		s.mu.Unlock()
		s.reportSize()
		g.err = err
		close(g.done)
	}
}

// write appends buf to the active segment and fsyncs it, starting a segment when there is
// none and sealing it once it is big enough.
func (s *spool) write(buf []byte) error {
	s.fileMu.Lock()
	defer s.fileMu.Unlock()
	if s.active == nil {
		if err := s.startSegment(); err != nil {
			return err
		}
	}
	_, err := s.active.Write(buf)
	if err == nil {
		err = s.active.Sync()
	}
	if err != nil {
		// Cut the partial write off so later records do not follow garbage; if even that
		// fails, seal the segment: reading stops at the garbage, which holds only records
		// nobody was told were safe.
		size := s.activeSize
		if terr := s.active.Truncate(size); terr != nil {
			if fi, serr := s.active.Stat(); serr == nil {
				size = fi.Size()
			}
			_ = s.active.Close()
			s.active = nil
		}
		s.addDisk(size - s.activeSize)
		s.activeSize = size
		return fmt.Errorf("spool: write: %w", err)
	}
	s.activeSize += int64(len(buf))
	s.addDisk(int64(len(buf)))
	if s.activeSize >= s.segmentMax {
		return s.sealActive()
	}
	return nil
}

func (s *spool) addDisk(n int64) {
	s.mu.Lock()
	s.disk += n
	s.mu.Unlock()
}

// startSegment creates the next segment file and makes its name durable; fileMu is held.
func (s *spool) startSegment() error {
	path := filepath.Join(s.dir, fmt.Sprintf("%020d%s", s.nextSeq, segmentExt))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return fmt.Errorf("spool: create segment: %w", err)
	}
	// Without syncing the directory a crash could keep the data but lose the file's name.
	if err := syncDir(s.dir); err != nil {
		f.Close()
		_ = os.Remove(path)
		return err
	}
	s.nextSeq++
	s.active, s.activeSize = f, 0
	return nil
}

// sealActive closes the active segment; fileMu is held. Its data is already synced.
func (s *spool) sealActive() error {
	if s.active == nil {
		return nil
	}
	err := s.active.Close()
	s.active, s.activeSize = nil, 0
	if err != nil {
		return fmt.Errorf("spool: close segment: %w", err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("spool: open dir: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("spool: sync dir: %w", err)
	}
	return nil
}

// Oldest returns the oldest sealed segment, sealing the active one when it is the only one
// left; ok is false when the spool has no records at all.
func (s *spool) Oldest() (seg segment, ok bool, err error) {
	s.fileMu.Lock()
	defer s.fileMu.Unlock()
	segs, err := s.list()
	if err != nil || len(segs) == 0 {
		return segment{}, false, err
	}
	if s.active != nil && segs[0].seq == s.nextSeq-1 {
		if err := s.sealActive(); err != nil {
			return segment{}, false, err
		}
	}
	return segs[0], true, nil
}

// Remove deletes a segment whose records are all in Kafka.
func (s *spool) Remove(seg segment) error {
	fi, err := os.Stat(seg.path)
	if err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	if err := os.Remove(seg.path); err != nil {
		return fmt.Errorf("spool: remove segment: %w", err)
	}
	s.addDisk(-fi.Size())
	s.reportSize()
	return nil
}

// Size is the bytes of the spool: segment files plus records waiting for their commit.
func (s *spool) Size() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.disk + s.queued
}

func (s *spool) reportSize() {
	if s.onSize != nil {
		s.onSize(s.Size())
	}
}

// Close commits what is queued, closes the files and releases the directory.
func (s *spool) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.kick)
	s.mu.Unlock()
	<-s.done
	s.fileMu.Lock()
	err := s.sealActive()
	s.fileMu.Unlock()
	s.unlock()
	return err
}

// readSegment returns the payloads of a segment's records. It stops at the first record
// that is cut short or fails its CRC and reports the bytes it skipped: after a crash that is
// the torn tail of the last commit.
func readSegment(path string) (payloads [][]byte, skipped int, err error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("spool: read segment: %w", err)
	}
	for off := 0; off < len(data); {
		rest := data[off:]
		if len(rest) < recordHeader {
			return payloads, len(rest), nil
		}
		n := int(binary.BigEndian.Uint32(rest))
		sum := binary.BigEndian.Uint32(rest[4:])
		if n == 0 || n > maxRecord || len(rest) < recordHeader+n {
			return payloads, len(rest), nil
		}
		p := rest[recordHeader : recordHeader+n]
		if crc32.Checksum(p, castagnoli) != sum {
			return payloads, len(rest), nil
		}
		payloads = append(payloads, p)
		off += recordHeader + n
	}
	return payloads, 0, nil
}
