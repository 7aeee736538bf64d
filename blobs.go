package handoff

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/artifacts"
	"github.com/handoff-a2a/handoff/internal/a2ahttp"
	"github.com/handoff-a2a/handoff/internal/auth"
	"github.com/handoff-a2a/handoff/internal/skill"
	"github.com/handoff-a2a/handoff/tasks"
)

// blobsPath is where the large raw parts of a delegated task's artifacts
// are served: blobsPath + "{task}/{digest}".
const blobsPath = "/a2a/blobs/"

// routeBlobs serves the blobs under base's blobsPath, and tells the
// delegate skills the base URL their blob parts point at.
func (a *Agent) routeBlobs(mux *http.ServeMux, base string, face *a2ahttp.Face) {
	if a.del != nil {
		a.del.base.Store(&base)
	}
	mux.Handle("GET "+blobsPath+"{task}/{digest}", face.Authenticated(http.HandlerFunc(a.blob)))
}

// blob answers GET /a2a/blobs/{task}/{digest}: the raw content a part of
// the task's artifacts names, to the callers who may read the task (its
// owner, exactly as GetTask checks it). Everything else — an unknown task,
// another caller's task, a digest the task does not name, a blob that is
// gone — is the same 404, so nobody learns what exists.
func (a *Agent) blob(w http.ResponseWriter, r *http.Request) {
	notFound := func() {
		writeRESTError(w, http.StatusNotFound, "NOT_FOUND", "TASK_NOT_FOUND", "no such blob for this caller")
	}
	if a.del == nil {
		notFound()
		return
	}
	id, digest := a2a.TaskID(r.PathValue("task")), r.PathValue("digest")
	owner := tasks.Owner{Principal: tasks.AnonymousPrincipal, Tenant: r.URL.Query().Get("tenant")}
	if p, ok := auth.PrincipalFrom(r.Context()); ok {
		owner.Principal = "user:" + p.Name
		if p.Tenant != "" { // a credential bound to a tenant reads only that tenant's tasks
			owner.Tenant = p.Tenant
		}
	}
	snap, err := a.store.Get(r.Context(), owner, id)
	if errors.Is(err, tasks.ErrNotFound) {
		notFound()
		return
	}
	if err != nil {
		a.log.Error("blob: read task", slog.String("task_id", string(id)), slog.Any("error", err))
		http.Error(w, "the task could not be read", http.StatusInternalServerError)
		return
	}
	part := blobPart(snap.Task, id, digest)
	if part == nil {
		notFound()
		return
	}
	rb, err := a.del.artifacts.OpenRaw(digest)
	if errors.Is(err, artifacts.ErrNotFound) || errors.Is(err, artifacts.ErrInvalidDigest) {
		notFound()
		return
	}
	if err != nil {
		a.log.Error("blob: open", slog.String("task_id", string(id)), slog.String("digest", digest), slog.Any("error", err))
		http.Error(w, "the blob could not be read", http.StatusInternalServerError)
		return
	}
	defer rb.Close()
	media := part.MediaType
	if media == "" {
		media = "application/octet-stream"
	}
	h := w.Header()
	h.Set("Content-Type", media)
	h.Set("Content-Length", strconv.FormatInt(rb.Size(), 10))
	h.Set("ETag", `"`+digest+`"`)
	h.Set("Cache-Control", "private, max-age=0")
	// The peer chose the media type: never let a browser run it as ours.
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "sandbox")
	disposition := "attachment"
	if part.Filename != "" {
		disposition += "; filename*=UTF-8''" + url.PathEscape(part.Filename)
	}
	h.Set("Content-Disposition", disposition)
	if _, err := io.Copy(w, rb); err != nil {
		// Part of the body is out: only an aborted response tells the
		// caller it is not the whole blob (ErrCorrupt, a read error).
		a.log.Error("blob: send", slog.String("task_id", string(id)), slog.String("digest", digest), slog.Any("error", err))
		panic(http.ErrAbortHandler)
	}
}

// blobURL is where a blob of task is served under base; the tenant, when
// the task has one, travels as a query parameter, as the task's other
// reads name it in their path. blobPart finds the part by this URL.
func blobURL(base string, task a2a.TaskID, tenant, digest string) string {
	u := strings.TrimSuffix(base, "/") + blobsPath + url.PathEscape(string(task)) + "/" + digest
	if tenant != "" {
		u += "?tenant=" + url.QueryEscape(tenant)
	}
	return u
}

// blobPart returns the part of the task's artifacts that this agent wrote
// for the blob digest (its skill.BlobKey metadata names the digest and its URL
// the task), or nil.
func blobPart(t *a2a.Task, id a2a.TaskID, digest string) *a2a.Part {
	suffix := blobsPath + url.PathEscape(string(id)) + "/" + digest
	for _, art := range t.Artifacts {
		if art == nil {
			continue
		}
		for _, p := range art.Parts {
			if p == nil {
				continue
			}
			u, ok := p.Content.(a2a.URL)
			meta, _ := p.Metadata[skill.BlobKey].(map[string]any)
			if !ok || meta == nil || meta["digest"] != digest {
				continue
			}
			if parsed, err := url.Parse(string(u)); err == nil && strings.HasSuffix(parsed.EscapedPath(), suffix) {
				return p
			}
		}
	}
	return nil
}
