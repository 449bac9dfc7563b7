package scrape

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
)

// Serve is the exporter process's side of the pipe: it reads requests from
// in, renders each with r and writes the answer to out, one at a time, until
// in ends (the agent closed the pipe or is gone). A request it cannot
// decode gets an error answer and the next one is read; a frame it cannot
// even delimit ends Serve with an error, since nothing after it can be
// trusted, and the agent starts a fresh process.
func Serve(in io.Reader, out io.Writer, r Renderer) error {
	br := bufio.NewReaderSize(in, 64<<10)
	var (
		fams    []Family // the table of the last request that sent one
		payload []byte
		resp    []byte
	)
	for {
		var err error
		payload, err = readFrame(br, payload)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		var (
			page   Page
			errMsg string
		)
		accept, s, err := decodeRequest(payload, fams)
		switch {
		case err != nil:
			errMsg = err.Error()
		case s.Families == nil && len(s.Points) > 0:
			errMsg = "scrape: request: points before any family table"
		default:
			fams = s.Families
			if page, err = r.Render(context.Background(), accept, &s); err != nil {
				errMsg = err.Error()
				if errMsg == "" {
					errMsg = "scrape: the renderer failed without saying why"
				}
			}
		}
		resp = appendResponse(resp[:0], page, errMsg)
		if _, err := out.Write(resp); err != nil {
			return fmt.Errorf("scrape: writing the answer: %w", err)
		}
	}
}
