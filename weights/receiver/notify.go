package receiver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// Update is what changed: the file now holds Version of Run.
type Update struct {
	Path    string // the weights file
	Dir     string // its folder (SGLang's model_path: the folder with config.json and the weights)
	Run     string
	Version uint64
}

// Notifier tells an inference engine that the receiver's file holds a new version: by an HTTP
// POST (SGLang's POST /update_weights_from_disk {"model_path": ...}, or any endpoint that takes
// a JSON body: HTTPNotifier) or by running a command (CommandNotifier). A nil error means the
// engine took the Update; a notifier owns no retry policy: the receiver calls again for the
// version until one call succeeds.
type Notifier interface {
	Notify(ctx context.Context, u Update) error
	String() string
}

// SGLangBody is the default HTTP body: what SGLang's /update_weights_from_disk takes.
const SGLangBody = `{"model_path": "{dir}"}`

// HTTPNotifier POSTs Body, with {path}, {dir}, {run} and {version} replaced by the update's values
// (escaped for a JSON string), to URL. A 2xx answer is success unless its JSON body says
// "success": false (SGLang answers 400 with its message on failure).
type HTTPNotifier struct {
	URL    string
	Body   string
	Client *http.Client // nil: http.DefaultClient; the receiver's context bounds each call
}

func (h *HTTPNotifier) String() string { return "POST " + h.URL }

// Notify posts the update.
func (h *HTTPNotifier) Notify(ctx context.Context, u Update) error {
	body := expand(h.Body, u)
	if !json.Valid([]byte(body)) {
		return fmt.Errorf("notify body %s is not valid JSON", body)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	c := h.Client
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var verdict struct {
		Success *bool  `json:"success"`
		Message string `json:"message"`
	}
	json.Unmarshal(answer, &verdict) // not every engine answers JSON
	if resp.StatusCode/100 != 2 || verdict.Success != nil && !*verdict.Success {
		return fmt.Errorf("%s answered %s: %s", h.URL, resp.Status, bytes.TrimSpace(answer))
	}
	return nil
}

// expand replaces the placeholders of a body template.
func expand(tmpl string, u Update) string {
	esc := func(s string) string {
		b, _ := json.Marshal(s)
		return string(b[1 : len(b)-1])
	}
	return strings.NewReplacer("{path}", esc(u.Path), "{dir}", esc(u.Dir), "{run}", esc(u.Run),
		"{version}", strconv.FormatUint(u.Version, 10)).Replace(tmpl)
}

// CommandNotifier runs Argv with the update in its environment (NEEDLE_WEIGHTS_PATH, _DIR, _RUN,
// _VERSION); exit status 0 is success.
type CommandNotifier struct {
	Argv []string
}

func (c *CommandNotifier) String() string { return strings.Join(c.Argv, " ") }

// Notify runs the command and waits for it.
func (c *CommandNotifier) Notify(ctx context.Context, u Update) error {
	cmd := exec.CommandContext(ctx, c.Argv[0], c.Argv[1:]...)
	cmd.Env = append(os.Environ(), "NEEDLE_WEIGHTS_PATH="+u.Path, "NEEDLE_WEIGHTS_DIR="+u.Dir,
		"NEEDLE_WEIGHTS_RUN="+u.Run, "NEEDLE_WEIGHTS_VERSION="+strconv.FormatUint(u.Version, 10))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", c, err, bytes.TrimSpace(out))
	}
	return nil
}

// NewNotifier is the notifier of a receiver's settings: a URL to POST body to (SGLangBody when
// body is empty), or a command, or neither (nil).
func NewNotifier(url, body string, argv []string) (Notifier, error) {
	switch {
	case url != "" && len(argv) > 0:
		return nil, fmt.Errorf("tell the engine by URL or by command, not both")
	case url != "":
		if body == "" {
			body = SGLangBody
		}
		return &HTTPNotifier{URL: url, Body: body}, nil
	case len(argv) > 0:
		return &CommandNotifier{Argv: argv}, nil
	}
	return nil, nil
}
