// Chat preview: talk to a published app through a console binding. Sends go to
// POST …/bindings/{id}/console/messages; the transcript (the user's messages and the reply
// segments, as they are delivered) is polled from GET … with a cursor.
import { Badge, Loading, Section } from '../components/bits.js';
import { ErrorBox } from '../components/error-box.js';
import { call, qs, tenantPath } from '../lib/api.js';
import { html, useEffect, useRef, useState } from '../lib/html.js';
import { useAction, useLoad } from '../lib/load.js';
import { tenantHref } from '../lib/route.js';
import { CHAT_TEXT } from '../lib/rules.js';
import { canWrite } from '../lib/session.js';

const POLL_MS = 1000;
/** What a photo may weigh here: its base64 must fit the send route's 8 MiB body (api/admin/console-media.ts). */
const MAX_PHOTO_BYTES = 6 * 1024 * 1024;

/** A picked file as the API takes an attachment: its type, name and bytes in base64. */
const attachmentOf = (file) =>
  new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => {
      const url = String(reader.result);
      resolve({
        content_type: file.type,
        file_name: file.name,
        data_base64: url.slice(url.indexOf(',') + 1),
      });
    };
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(file);
  });
const randomId = (prefix) => `${prefix}${Date.now().toString(36)}${Math.random().toString(36).slice(2, 10)}`;

function conversationOf(bindingId, fresh = false) {
  const key = `switchyard.console.chat.${bindingId}`;
  let id = sessionStorage.getItem(key);
  if (!id || fresh) {
    id = randomId('c');
    sessionStorage.setItem(key, id);
  }
  return id;
}

const itemKey = (i) => `${i.kind}:${i.event_id}:${i.segment_index ?? 0}`;

/**
 * The transcript in the server's order: a new item is appended, one already shown (a user
 * message whose status changed, or the local copy of a sent one) is replaced where it stands.
 */
function useTranscript(base, conversationId) {
  const [items, setItems] = useState([]);
  const [error, setError] = useState(null);
  const cursor = useRef(null);
  const merge = (incoming) =>
    setItems((old) => {
      const byKey = new Map(old.map((i) => [itemKey(i), i]));
      for (const i of incoming) byKey.set(itemKey(i), i);
      return [...byKey.values()];
    });
  useEffect(() => {
    let live = true;
    let timer;
    cursor.current = null;
    setItems([]);
    const poll = async () => {
      try {
        const page = await call(
          'GET',
          `${base}${qs({ conversation_id: conversationId, after: cursor.current, limit: 100 })}`,
        );
        if (!live) return;
        setError(null);
        if (page.next_cursor) cursor.current = page.next_cursor;
        if (page.items.length) merge(page.items);
      } catch (err) {
        if (live) setError(err);
      }
      if (live) timer = setTimeout(poll, POLL_MS);
    };
    void poll();
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, [base, conversationId]);
  /** The local copy of a sent message; the poll's own (newer) copy is never replaced by it. */
  const addLocal = (item) =>
    setItems((old) => (old.some((i) => itemKey(i) === itemKey(item)) ? old : [...old, item]));
  return { items, error, addLocal };
}

/**
 * What is being typed, with the client_message_id it will be sent under: made with the draft and
 * kept until the API's 202, so a retry after a lost answer is the same message (the API answers
 * `duplicate: true`), never a second one.
 */
const newDraft = () => ({ text: '', id: randomId('m'), photo: null });

export function Chat({ session, tenantId, bindingId }) {
  const binding = useLoad(
    () => call('GET', tenantPath(tenantId, 'bindings', bindingId)),
    [tenantId, bindingId],
  );
  const [conversationId, setConversationId] = useState(() => conversationOf(bindingId));
  const base = tenantPath(tenantId, 'bindings', bindingId, 'console', 'messages');
  const transcript = useTranscript(base, conversationId);
  const action = useAction();
  const [draft, setDraft] = useState(newDraft);
  const [invalid, setInvalid] = useState(null);
  // Set synchronously, unlike action.busy: a second Enter before the re-render sends nothing.
  const sending = useRef(false);
  const photoInput = useRef(null);
  const writable = canWrite(session);
  if (binding.error) return html`<${ErrorBox} error=${binding.error} />`;
  if (!binding.data) return html`<${Loading} />`;
  const b = binding.data;
  const send = async () => {
    if (sending.current) return;
    const { text, id, photo } = draft;
    // A photo's text is its caption, which may be empty.
    const problem =
      photo && photo.size > MAX_PHOTO_BYTES
        ? `the photo is over ${MAX_PHOTO_BYTES / 1024 / 1024} MiB`
        : photo && text.trim() === ''
          ? null
          : CHAT_TEXT(text);
    setInvalid(problem);
    if (problem) return;
    sending.current = true;
    try {
      const sent = await action.run(async () =>
        call('POST', base, {
          conversation_id: conversationId,
          text,
          client_message_id: id,
          ...(photo ? { attachments: [await attachmentOf(photo)] } : {}),
        }),
      );
      if (!sent) return; // kept, with its id, for the retry
      // What was typed meanwhile stays, as a new message.
      setDraft((d) => (d.id !== id ? d : d.text === text ? newDraft() : { ...newDraft(), text: d.text }));
      if (photoInput.current) photoInput.current.value = '';
      transcript.addLocal({
        kind: 'user',
        event_id: sent.event_id,
        segment_index: null,
        text,
        ...(photo
          ? { attachments: [{ file_name: photo.name, content_type: photo.type, size_bytes: photo.size }] }
          : {}),
        status: sent.status,
        at: new Date().toISOString(),
      });
    } finally {
      sending.current = false;
    }
  };
  const onKeyDown = (e) => {
    if (e.key !== 'Enter' || e.shiftKey) return;
    // An IME composing (Chinese, Japanese input) confirms its candidate with Enter: not a send.
    if (e.isComposing || e.keyCode === 229) return;
    e.preventDefault();
    void send();
  };
  const newConversation = () => {
    setConversationId(conversationOf(bindingId, true));
    setDraft((d) => ({ ...d, id: randomId('m') }));
  };
  const items = transcript.items;
  return html`<${Section} title=${`Chat preview · ${b.binding_id}`}
    actions=${html`<button type="button" class="link" onClick=${newConversation}>New conversation</button>`}>
    <p class="muted">Binding <${Badge} status=${b.status} /> · app ${b.app_id} · conversation <code>${conversationId}</code></p>
    <div class="chat" data-testid="chat" aria-live="polite">
      ${items.map(
        (
          i,
        ) => html`<div class=${`bubble ${i.kind}`} data-kind=${i.kind} data-event=${i.event_id} data-status=${i.status}>
          ${i.text && html`<p>${i.text}</p>`}
          ${(i.attachments ?? []).map(
            (a) =>
              html`<p class="attachment" data-testid="attachment">📎 ${a.file_name ?? 'attachment'} <small class="muted">(${a.content_type})</small></p>`,
          )}
          <small class="muted">
            ${new Date(i.at).toLocaleTimeString()} · ${i.status}
            ${i.kind === 'user' && html` · <a href=${tenantHref(tenantId, `/messages/${i.event_id}`)}>message life</a>`}
          </small>
        </div>`,
      )}
      ${items.length === 0 && html`<p class="muted">No messages yet${writable ? ': say hello.' : '.'}</p>`}
    </div>
    <${ErrorBox} error=${transcript.error} />
    ${
      writable &&
      html`<form class="chat-input" onSubmit=${(e) => {
        e.preventDefault();
        void send();
      }}>
        <textarea name="text" rows="2" aria-label="Message" value=${draft.text}
          onInput=${(e) => {
            const text = e.currentTarget.value;
            setDraft((d) => ({ ...d, text }));
          }}
          onKeyDown=${onKeyDown}></textarea>
        <label class="attach">Attach a photo
          <input type="file" name="photo" accept="image/jpeg,image/png,image/gif,image/webp" ref=${photoInput}
            onChange=${(e) => {
              const photo = e.currentTarget.files?.[0] ?? null;
              setDraft((d) => ({ ...d, photo }));
            }} />
        </label>
        <button type="submit" data-mutation disabled=${action.busy}>Send</button>
        ${invalid && html`<small class="field-error" role="alert">${invalid}</small>`}
      </form>`
    }
    <${ErrorBox} error=${action.error} />
  </${Section}>`;
}
