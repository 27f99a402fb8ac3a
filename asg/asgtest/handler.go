package asgtest

import (
	"encoding/base64"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/termsig/termsig/internal/fakefault"
)

// The query protocol of Auto Scaling.
const (
	apiVersion = "2011-01-01"
	xmlns      = "http://autoscaling.amazonaws.com/doc/2011-01-01/"
	authScheme = "AWS4-HMAC-SHA256 "
)

// maxBody bounds what the server reads of a request, so that a client
// cannot make it use unbounded memory. Real requests are a few hundred
// bytes; 50 instance ids make 2 KiB.
const maxBody = 64 << 10

// ServeHTTP answers r as the server answers on its own port, so that a
// program can also serve the fake on a listener of its own, such as a
// fixed port. Those requests are counted, faulted and recorded as the
// others are; Stop and Start concern only the server's own listener.
// Faults that drop the connection hang up through w, which must then be
// an [http.Hijacker], as net/http's HTTP/1 server gives.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handle(w, r) }

// An apiError is an error answer of the API.
type apiError struct {
	status int
	code   string
	msg    string
}

func validation(format string, args ...any) *apiError {
	return &apiError{http.StatusBadRequest, "ValidationError", fmt.Sprintf(format, args...)}
}

// handle answers one request: with the fault it takes, if any, else as
// Auto Scaling does.
func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	// Read the body now (bounded): the fault key is in it, and until it
	// is read net/http does not watch the connection, so that a fault
	// that holds the request would not see its client give up.
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	params, perr := parseParams(r, body)
	act := params.Get("Action")
	s.host.Arrive()
	defer s.host.Answered(act)

	f, cleared, hit := s.faults.Take(act)
	if hit && f.Apply(w, r, cleared, s.host.Gone(), write) == fakefault.Handled {
		return
	}

	switch {
	case err != nil:
		return // the client went
	case len(body) > maxBody:
		s.answer(w, act, params, &apiError{http.StatusRequestEntityTooLarge, "RequestEntityTooLarge", "Request body must be at most " + strconv.Itoa(maxBody) + " bytes"})
	case perr != nil:
		s.answer(w, act, params, &apiError{http.StatusNotFound, "MalformedQueryString", perr.Error()})
	default:
		s.serve(w, r, act, params)
	}
}

// parseParams returns the parameters of r: its query string and, for a
// form, its body.
func parseParams(r *http.Request, body []byte) (url.Values, error) {
	params, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return url.Values{}, err
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); r.Method == http.MethodPost && mt == "application/x-www-form-urlencoded" {
		form, err := url.ParseQuery(string(body))
		if err != nil {
			return params, err
		}
		for k, v := range form {
			params[k] = append(params[k], v...)
		}
	}
	return params, nil
}

// serve answers a request whose parameters have been read.
func (s *Server) serve(w http.ResponseWriter, r *http.Request, act string, p url.Values) {
	region := regionOf(r.Header.Get("Authorization"))
	op := operations[act]
	s.mu.Lock()
	denied := s.denied[act]
	s.mu.Unlock()
	var aerr *apiError
	switch {
	case !strings.HasPrefix(r.Header.Get("Authorization"), authScheme):
		aerr = &apiError{http.StatusForbidden, "MissingAuthenticationToken", "Request is missing Authentication Token"}
	case act == "":
		aerr = &apiError{http.StatusBadRequest, "MissingAction", "Missing Action"}
	case op == nil || p.Get("Version") != apiVersion:
		aerr = &apiError{http.StatusBadRequest, "InvalidAction", "Could not find operation " + act + " for version " + p.Get("Version")}
	case denied:
		aerr = s.deny(act, p.Get("AutoScalingGroupName"), region)
	}
	if aerr != nil {
		s.answer(w, act, p, aerr)
		return
	}
	call := newCall(act, p)
	s.mu.Lock()
	result, aerr := op(s, p, &call, region)
	if aerr != nil {
		call.Err = aerr.code
	}
	s.record(call)
	s.mu.Unlock()
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	id := newUUID()
	writeXML(w, http.StatusOK, id, `<`+act+`Response xmlns="`+xmlns+`"><`+act+`Result>`+result+`</`+act+`Result><ResponseMetadata><RequestId>`+id+`</RequestId></ResponseMetadata></`+act+`Response>`)
}

// answer records a call of act that failed with aerr, and sends aerr.
func (s *Server) answer(w http.ResponseWriter, act string, p url.Values, aerr *apiError) {
	c := newCall(act, p)
	c.Err = aerr.code
	s.mu.Lock()
	s.record(c)
	s.mu.Unlock()
	writeError(w, aerr)
}

func newCall(act string, p url.Values) Call {
	return Call{
		Action:     act,
		Group:      p.Get("AutoScalingGroupName"),
		Hook:       p.Get("LifecycleHookName"),
		InstanceID: p.Get("InstanceId"),
		Token:      p.Get("LifecycleActionToken"),
		Result:     p.Get("LifecycleActionResult"),
		At:         time.Now(),
	}
}

// deny returns the AccessDenied that AWS sends to a role without
// autoscaling:act: naming the group's ARN for the actions that take
// resource-level permissions.
func (s *Server) deny(act, groupName, region string) *apiError {
	resource := ""
	if act == "RecordLifecycleActionHeartbeat" || act == "CompleteLifecycleAction" {
		s.mu.Lock()
		g := s.groups[groupName]
		s.mu.Unlock()
		if g == nil {
			g = &group{name: groupName, id: "*"}
		}
		resource = g.arn(region)
	}
	return &apiError{http.StatusForbidden, "AccessDenied", deniedMessage(act, resource)}
}

// deniedMessage words AWS's AccessDenied for act on resource ("" for the
// actions that take no resource).
func deniedMessage(act, resource string) string {
	on := ""
	if resource != "" {
		on = " on resource: " + resource
	}
	return "User: arn:aws:sts::" + accountID + ":assumed-role/asgtest-role/i-0123456789abcdef0 is not authorized to perform: autoscaling:" +
		act + on + " because no identity-based policy allows the autoscaling:" + act + " action"
}

// regionOf returns the region of the credential scope of a SigV4
// Authorization header, "us-east-1" if it has none.
func regionOf(auth string) string {
	_, cred, ok := strings.Cut(auth, "Credential=")
	if !ok {
		return "us-east-1"
	}
	cred, _, _ = strings.Cut(cred, ",")
	parts := strings.Split(cred, "/") // AKID/date/region/service/aws4_request
	if len(parts) < 5 || parts[2] == "" {
		return "us-east-1"
	}
	return parts[2]
}

// An operation answers one action with the inner XML of its Result, or an
// error; it records in c what it learns (the instance or token of the
// action it found). s.mu is held.
type operation func(s *Server, p url.Values, c *Call, region string) (string, *apiError)

var operations = map[string]operation{
	"DescribeAutoScalingInstances":   (*Server).describeInstances,
	"DescribeLifecycleHooks":         (*Server).describeHooks,
	"DescribeScalingActivities":      (*Server).describeActivities,
	"RecordLifecycleActionHeartbeat": (*Server).heartbeat,
	"CompleteLifecycleAction":        (*Server).complete,
}

func (s *Server) describeInstances(p url.Values, c *Call, _ string) (string, *apiError) {
	ids := list(p, "InstanceIds")
	c.InstanceID = strings.Join(ids, ",")
	if len(ids) > 50 {
		return "", validation("The number of instance ids that may be passed in is limited to 50")
	}
	limit, aerr := maxRecords(p, 50)
	if aerr != nil {
		return "", aerr
	}
	var all []*instance
	for _, in := range s.instancesSorted() {
		if len(ids) == 0 || contains(ids, in.id) {
			all = append(all, in)
		}
	}
	page, next, aerr := paginate(all, p.Get("NextToken"), limit, func(in *instance) string { return in.id })
	if aerr != nil {
		return "", aerr
	}
	var x xmlw
	x.open("AutoScalingInstances")
	for _, in := range page {
		x.open("member")
		x.el("InstanceId", in.id)
		x.el("InstanceType", "t3.micro")
		x.el("AutoScalingGroupName", in.group)
		x.el("AvailabilityZone", "us-east-1a")
		x.el("LifecycleState", in.state)
		x.el("HealthStatus", "HEALTHY")
		x.open("LaunchTemplate")
		x.el("LaunchTemplateId", "lt-0123456789abcdef0")
		x.el("LaunchTemplateName", "asgtest")
		x.el("Version", "1")
		x.close("LaunchTemplate")
		x.el("ProtectedFromScaleIn", "false")
		x.close("member")
	}
	x.close("AutoScalingInstances")
	x.opt("NextToken", next)
	return x.String(), nil
}

func (s *Server) describeHooks(p url.Values, c *Call, _ string) (string, *apiError) {
	name := p.Get("AutoScalingGroupName")
	if aerr := required(p, "AutoScalingGroupName"); aerr != nil {
		return "", aerr
	}
	names := list(p, "LifecycleHookNames")
	if len(names) > 50 {
		return "", validation("1 validation error detected: Value '%v' at 'lifecycleHookNames' failed to satisfy constraint: Member must have length less than or equal to 50", names)
	}
	g := s.groups[name]
	if g == nil {
		return "", validation("AutoScalingGroup name not found - AutoScalingGroup %s not found", name)
	}
	var x xmlw
	x.open("LifecycleHooks")
	for _, h := range g.hooks {
		if len(names) == 0 || contains(names, h.Name) {
			x.open("member")
			x.el("LifecycleHookName", h.Name)
			x.el("AutoScalingGroupName", g.name)
			x.el("LifecycleTransition", h.Transition)
			x.el("HeartbeatTimeout", strconv.Itoa(int(h.HeartbeatTimeout/time.Second)))
			x.el("GlobalTimeout", strconv.Itoa(int(h.GlobalTimeout/time.Second)))
			x.el("DefaultResult", h.DefaultResult)
			x.close("member")
		}
	}
	x.close("LifecycleHooks")
	return x.String(), nil
}

func (s *Server) describeActivities(p url.Values, c *Call, region string) (string, *apiError) {
	ids := list(p, "ActivityIds")
	if len(ids) > 50 {
		return "", validation("The number of activity ids that may be passed in is limited to 50")
	}
	limit, aerr := maxRecords(p, 100)
	if aerr != nil {
		return "", aerr
	}
	name := p.Get("AutoScalingGroupName")
	var all []*activity
	for i := len(s.activities) - 1; i >= 0; i-- { // newest first
		a := s.activities[i]
		if (name == "" || a.group == name) && (len(ids) == 0 || contains(ids, a.id)) {
			all = append(all, a)
		}
	}
	page, next, aerr := paginate(all, p.Get("NextToken"), limit, func(a *activity) string { return a.id })
	if aerr != nil {
		return "", aerr
	}
	var x xmlw
	x.open("Activities")
	for _, a := range page {
		status, progress, end := "MidLifecycleAction", 50, ""
		switch {
		case !a.end.IsZero():
			status, progress, end = "Successful", 100, stamp(a.end)
		case s.instances[a.instance].state == StateProceed:
			status = "InProgress"
		}
		x.open("member")
		x.el("ActivityId", a.id)
		x.el("AutoScalingGroupName", a.group)
		if g := s.groups[a.group]; g != nil {
			x.el("AutoScalingGroupARN", g.arn(region))
		}
		x.el("Description", "Terminating EC2 instance: "+a.instance)
		x.el("Cause", a.cause)
		x.el("StartTime", stamp(a.start))
		x.opt("EndTime", end)
		x.el("StatusCode", status)
		x.el("Progress", strconv.Itoa(progress))
		x.el("Details", `{"Subnet ID":"subnet-0123456789abcdef0","Availability Zone":"us-east-1a"}`)
		x.close("member")
	}
	x.close("Activities")
	x.opt("NextToken", next)
	return x.String(), nil
}

func (s *Server) heartbeat(p url.Values, c *Call, _ string) (string, *apiError) {
	in, a, aerr := s.find(p, c, false)
	if aerr != nil {
		return "", aerr
	}
	a.deadline = minTime(time.Now().Add(a.hook.HeartbeatTimeout), a.global)
	s.schedule(in, a)
	return "", nil
}

func (s *Server) complete(p url.Values, c *Call, _ string) (string, *apiError) {
	in, a, aerr := s.find(p, c, true)
	if aerr != nil {
		return "", aerr
	}
	s.end(in, a, p.Get("LifecycleActionResult"), time.Now())
	return "", nil
}

// find returns the lifecycle action that a heartbeat or completion
// names, after checking the parameters as Auto Scaling does.
func (s *Server) find(p url.Values, c *Call, completion bool) (*instance, *action, *apiError) {
	names := []string{"LifecycleHookName", "AutoScalingGroupName"}
	if completion {
		names = append(names, "LifecycleActionResult")
	}
	if aerr := required(p, names...); aerr != nil {
		return nil, nil, aerr
	}
	if r := p.Get("LifecycleActionResult"); completion && r != resultContinue && r != resultAbandon {
		return nil, nil, validation("1 validation error detected: Value '%s' at 'lifecycleActionResult' failed to satisfy constraint: Member must satisfy enum value set: [CONTINUE, ABANDON]", r)
	}
	id, token := p.Get("InstanceId"), p.Get("LifecycleActionToken")
	if id == "" && token == "" {
		return nil, nil, validation("Either LifecycleActionToken or InstanceId must be specified")
	}
	in, a := s.active(p.Get("AutoScalingGroupName"), p.Get("LifecycleHookName"), id, token, time.Now())
	if a == nil {
		if token != "" {
			return nil, nil, validation("No active Lifecycle Action found with token %s", token)
		}
		return nil, nil, validation("No active Lifecycle Action found with instance ID %s", id)
	}
	c.InstanceID, c.Token = in.id, a.token
	return in, a, nil
}

// required returns the ValidationError of AWS's input validation for the
// parameters of names that p lacks, or nil.
func required(p url.Values, names ...string) *apiError {
	var missing []string
	for _, n := range names {
		if p.Get(n) == "" {
			missing = append(missing, "Value null at '"+lowerFirst(n)+"' failed to satisfy constraint: Member must not be null")
		}
	}
	switch len(missing) {
	case 0:
		return nil
	case 1:
		return validation("1 validation error detected: %s", missing[0])
	}
	return validation("%d validation errors detected: %s", len(missing), strings.Join(missing, "; "))
}

// maxRecords returns the MaxRecords of p, def if it has none.
func maxRecords(p url.Values, def int) (int, *apiError) {
	v := p.Get("MaxRecords")
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	switch {
	case err != nil:
		return 0, validation("1 validation error detected: Value '%s' at 'maxRecords' failed to satisfy constraint: Member must be an integer", v)
	case n > def:
		return 0, validation("1 validation error detected: Value '%d' at 'maxRecords' failed to satisfy constraint: Member must have value less than or equal to %d", n, def)
	case n < 1:
		return 0, validation("1 validation error detected: Value '%d' at 'maxRecords' failed to satisfy constraint: Member must have value greater than or equal to 1", n)
	}
	return n, nil
}

// paginate returns the page of limit items of all after the one that
// token names, and the token of the next page ("" if none).
func paginate[T any](all []T, token string, limit int, key func(T) string) ([]T, string, *apiError) {
	start := 0
	if token != "" {
		k, err := base64.RawURLEncoding.DecodeString(token)
		i := -1
		for j, it := range all {
			if err == nil && key(it) == string(k) {
				i = j
			}
		}
		if i < 0 {
			return nil, "", &apiError{http.StatusBadRequest, "InvalidNextToken", "The token '" + token + "' is invalid."}
		}
		start = i + 1
	}
	end := min(start+limit, len(all))
	next := ""
	if end < len(all) {
		next = base64.RawURLEncoding.EncodeToString([]byte(key(all[end-1])))
	}
	return all[start:end], next, nil
}

// list returns the list parameter name: name.member.1, name.member.2...
func list(p url.Values, name string) []string {
	var out []string
	for i := 1; ; i++ {
		v, ok := p[name+".member."+strconv.Itoa(i)]
		if !ok {
			return out
		}
		out = append(out, v[0])
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func lowerFirst(s string) string { return strings.ToLower(s[:1]) + s[1:] }

// stamp writes t as Auto Scaling writes times: UTC, milliseconds.
func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// xmlw writes XML as Auto Scaling does: lists as name/member, text with
// &, < and > escaped (quotes are left as they are).
type xmlw struct{ strings.Builder }

func (x *xmlw) open(name string)  { x.WriteString("<" + name + ">") }
func (x *xmlw) close(name string) { x.WriteString("</" + name + ">") }

func (x *xmlw) el(name, text string) {
	x.open(name)
	x.WriteString(escaper.Replace(text))
	x.close(name)
}

// opt writes the element name unless text is empty.
func (x *xmlw) opt(name, text string) {
	if text != "" {
		x.el(name, text)
	}
}

var escaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// errorXML returns the ErrorResponse of e, as Auto Scaling writes it.
func errorXML(e *apiError, requestID string) string {
	typ := "Sender"
	if e.status >= 500 {
		typ = "Receiver"
	}
	var x xmlw
	x.WriteString(`<ErrorResponse xmlns="` + xmlns + `">`)
	x.open("Error")
	x.el("Type", typ)
	x.el("Code", e.code)
	x.el("Message", e.msg)
	x.close("Error")
	x.el("RequestId", requestID)
	x.close("ErrorResponse")
	return x.String()
}

func writeError(w http.ResponseWriter, e *apiError) {
	id := newUUID()
	writeXML(w, e.status, id, errorXML(e, id))
}

// writeXML answers with status and body, with the headers Auto Scaling
// puts on its answers.
func writeXML(w http.ResponseWriter, status int, requestID, body string) {
	h := w.Header()
	h.Set("Content-Type", "text/xml")
	h["x-amzn-RequestId"] = []string{requestID}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// write answers for a fault: an ErrorResponse (see [ErrorFault]) as Auto
// Scaling sends one, its RequestId in x-amzn-RequestId too; anything else
// as text, with the status text for an
// empty body unless the status is 200.
func write(w http.ResponseWriter, status int, body string) {
	if strings.HasPrefix(body, "<ErrorResponse") {
		_, id, _ := strings.Cut(body, "<RequestId>")
		id, _, _ = strings.Cut(id, "</RequestId>")
		writeXML(w, status, id, body)
		return
	}
	if body == "" && status != http.StatusOK {
		body = http.StatusText(status)
	}
	w.Header().Set("Content-Type", "text/plain")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}
