// Passkey ceremonies of the inbox: adding a passkey, signing in with one,
// and confirming an approval or the consent to a connection with one. A
// form marked data-webauthn asks the server for a challenge (data-begin),
// hands it to the browser's authenticator, and submits itself with the
// answer in two hidden fields.
// The server checks everything; without this script those forms are
// refused with a page that says why.
"use strict";

// b64urlDecode turns base64url (no padding) into bytes.
function b64urlDecode(s) {
  const b64 = s.replace(/-/g, "+").replace(/_/g, "/") + "===".slice((s.length + 3) % 4);
  const bin = atob(b64);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

// b64urlEncode turns bytes (an ArrayBuffer or a view) into base64url.
function b64urlEncode(buf) {
  const bytes = buf instanceof ArrayBuffer ? new Uint8Array(buf) : new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength);
  let bin = "";
  for (let i = 0; i < bytes.length; i++) bin += String.fromCharCode(bytes[i]);
  return btoa(bin).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function decodeCredentialList(list) {
  return (list || []).map((c) => Object.assign({}, c, { id: b64urlDecode(c.id) }));
}

// creationOptions and requestOptions turn the server's JSON into what
// navigator.credentials takes.
function creationOptions(o) {
  const pk = Object.assign({}, o.publicKey);
  pk.challenge = b64urlDecode(pk.challenge);
  pk.user = Object.assign({}, pk.user, { id: b64urlDecode(pk.user.id) });
  pk.excludeCredentials = decodeCredentialList(pk.excludeCredentials);
  return { publicKey: pk };
}

function requestOptions(o) {
  const pk = Object.assign({}, o.publicKey);
  pk.challenge = b64urlDecode(pk.challenge);
  pk.allowCredentials = decodeCredentialList(pk.allowCredentials);
  return { publicKey: pk };
}

// encodeCredential turns the authenticator's answer into the JSON the
// server parses.
function encodeCredential(cred) {
  const r = cred.response;
  const out = {
    id: cred.id, rawId: b64urlEncode(cred.rawId), type: cred.type,
    clientExtensionResults: cred.getClientExtensionResults ? cred.getClientExtensionResults() : {},
    response: { clientDataJSON: b64urlEncode(r.clientDataJSON) },
  };
  if (cred.authenticatorAttachment) out.authenticatorAttachment = cred.authenticatorAttachment;
  if (r.attestationObject) {
    out.response.attestationObject = b64urlEncode(r.attestationObject);
    if (r.getTransports) out.response.transports = r.getTransports();
  } else {
    out.response.authenticatorData = b64urlEncode(r.authenticatorData);
    out.response.signature = b64urlEncode(r.signature);
    if (r.userHandle) out.response.userHandle = b64urlEncode(r.userHandle);
  }
  return out;
}

function showError(form, msg) {
  const el = form.querySelector("[data-webauthn-error]");
  if (!el) return;
  el.textContent = msg;
  el.hidden = false;
}

// beginFields are the form's fields but the answer's, for the begin call.
function beginFields(form) {
  const params = new URLSearchParams();
  for (const [k, v] of new FormData(form)) {
    if (k !== "webauthn_handle" && k !== "webauthn_response") params.append(k, v);
  }
  return params;
}

async function ceremony(form) {
  if (!window.PublicKeyCredential || !navigator.credentials) {
    showError(form, "This browser has no passkeys.");
    return;
  }
  const res = await fetch(form.dataset.begin, {
    method: "POST", credentials: "same-origin", body: beginFields(form),
    headers: { "Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json" },
  });
  const body = await res.json().catch(() => ({}));
  if (!res.ok) {
    showError(form, (body.error && body.error.message) || "The server refused to start (" + res.status + ").");
    return;
  }
  let cred;
  try {
    cred = form.dataset.webauthn === "register"
      ? await navigator.credentials.create(creationOptions(body.options))
      : await navigator.credentials.get(requestOptions(body.options));
  } catch (e) {
    showError(form, e && e.name === "NotAllowedError"
      ? "The passkey prompt was cancelled or timed out. Try again."
      : "The passkey could not be used: " + (e && e.message ? e.message : e));
    return;
  }
  if (!cred) {
    showError(form, "No passkey was chosen.");
    return;
  }
  form.elements.webauthn_handle.value = body.handle;
  form.elements.webauthn_response.value = JSON.stringify(encodeCredential(cred));
  form.dataset.answered = "1";
  form.submit();
}

function webauthnForms() {
  for (const form of document.querySelectorAll("form[data-webauthn]")) {
    form.addEventListener("submit", (ev) => {
      if (form.dataset.answered) return;
      // A button marked data-webauthn-skip sends the form as it is (the
      // consent's password instead of a passkey).
      if (ev.submitter && ev.submitter.hasAttribute("data-webauthn-skip")) return;
      ev.preventDefault();
      if (form.dataset.busy) return;
      form.dataset.busy = "1";
      ceremony(form).catch((e) => showError(form, "Something went wrong: " + e)).finally(() => { delete form.dataset.busy; });
    });
  }
}

document.addEventListener("DOMContentLoaded", webauthnForms);
