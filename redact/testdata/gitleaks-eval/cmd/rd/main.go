package main

import (
	"fmt"
	"os"

	"github.com/tracectl/tracectl/redact"
)

func main() {
	r, _ := redact.Message([]byte(`"`+os.Args[0]+`"`), nil)
	fmt.Println(len(r.Redactions))
}
