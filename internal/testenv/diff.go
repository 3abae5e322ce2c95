package testenv

import (
	"fmt"
	"strings"
)

// FirstDiff shows the first line where text a (labelled aName) and text b
// (bName) differ, numbered from 1; "" when they are equal.
func FirstDiff(a, b []byte, aName, bName string) string {
	al, bl := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := 0; i < max(len(al), len(bl)); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			w := max(len(aName), len(bName)) + 1
			return fmt.Sprintf("line %d:\n  %-*s %s\n  %-*s %s", i+1, w, aName+":", x, w, bName+":", y)
		}
	}
	return ""
}
