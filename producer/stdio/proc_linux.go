package stdio

import (
	"bytes"
	"os"
	"strconv"
)

// liveMember reports whether a process of group pgid is still running, not
// only a zombie: an orphaned grandchild that was killed stays in the group
// until init reaps it, which can take a while in a container.
func liveMember(pgid int) bool {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return true // cannot tell: the caller's bounded wait decides
	}
	want := []byte(strconv.Itoa(pgid))
	for _, e := range ents {
		name := e.Name()
		if name[0] < '0' || name[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + name + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces and parens.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(b[i+1:])
		if len(f) >= 3 && bytes.Equal(f[2], want) && !bytes.Equal(f[0], []byte("Z")) {
			return true
		}
	}
	return false
}
