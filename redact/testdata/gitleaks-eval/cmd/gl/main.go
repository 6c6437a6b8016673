package main

import (
	"fmt"
	"os"

	"github.com/zricethezav/gitleaks/v8/detect"
)

func main() {
	d, err := detect.NewDetectorDefaultConfig()
	if err != nil {
		panic(err)
	}
	fmt.Println(len(d.DetectString(os.Args[0])))
}
