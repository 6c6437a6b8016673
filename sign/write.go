package sign

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// recordFileName is the record's name inside an evidence bundle.
const recordFileName = "record.json"

// writeRecordFile writes data as dir/record.json atomically and refuses to
// replace an existing record (the error wraps fs.ErrExist). The bytes go to
// a temporary file created exclusively in dir with mode 0600, are fsynced,
// then hard-linked to record.json (link fails rather than replaces, so two
// writers cannot both win), the temporary name is removed and dir is
// fsynced. A reader sees no record.json or the whole of it; after a crash
// at most a stray ".record.json.tmp-*" file remains. The file system must
// support hard links (every local Unix file system does).
func writeRecordFile(dir string, data []byte) error { return writeRecord(dir, data, false) }

// replaceRecordFile is writeRecordFile for a caller that means to replace
// an existing record.json: the final step is rename(2), atomic too.
func replaceRecordFile(dir string, data []byte) error { return writeRecord(dir, data, true) }

func writeRecord(dir string, data []byte, replace bool) (err error) {
	final := filepath.Join(dir, recordFileName)
	if !replace {
		// Fail early and cheaply; the link below is what guarantees it.
		if _, err := os.Lstat(final); err == nil {
			return fmt.Errorf("write %s: %w", final, fs.ErrExist)
		}
	}
	tmp, err := os.CreateTemp(dir, "."+recordFileName+".tmp-*") // O_EXCL, mode 0600
	if err != nil {
		return fmt.Errorf("write %s: %w", final, err)
	}
	name := tmp.Name()
	defer func() {
		if rmErr := os.Remove(name); rmErr != nil && !errors.Is(rmErr, fs.ErrNotExist) && err == nil {
			err = fmt.Errorf("write %s: remove temporary file: %w", final, rmErr)
		}
	}()
	if err := writeSync(tmp, data); err != nil {
		return fmt.Errorf("write %s: %w", final, err)
	}
	if replace {
		err = os.Rename(name, final)
	} else if err = os.Link(name, final); err == nil {
		err = os.Remove(name) // before the directory sync, so it is durable too
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", final, err)
	}
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("write %s: sync directory: %w", final, err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}
