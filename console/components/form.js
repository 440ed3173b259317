// Small form helpers: values as strings, client-side errors per field, and labelled inputs.
import { html, useState } from '../lib/html.js';
import { check } from '../lib/rules.js';

/** `{ values, errors, set, validate, reset }`; validate() applies `rules` and says whether all pass. */
export function useForm(initial, rules = {}) {
  const [values, setValues] = useState(initial);
  const [errors, setErrors] = useState({});
  const set = (field) => (e) => {
    const v = e.currentTarget.type === 'checkbox' ? e.currentTarget.checked : e.currentTarget.value;
    setValues((old) => ({ ...old, [field]: v }));
  };
  const validate = (extra = {}) => {
    const found = { ...check(values, rules), ...extra };
    for (const k of Object.keys(extra)) if (!extra[k]) delete found[k];
    setErrors(found);
    return Object.keys(found).length === 0;
  };
  return { values, errors, set, validate, setValues, reset: () => setValues(initial) };
}

/** A labelled input (or select/textarea by `as`) bound to `form.values[name]`. */
let seq = 0;

export function Field({ form, name, label, as = 'input', type = 'text', options, rows, hint, ...rest }) {
  // Unique per instance: a page may show several forms with the same field name.
  const [id] = useState(() => `f${++seq}-${name}`);
  const value = form.values[name] ?? '';
  const error = form.errors[name];
  let control;
  if (as === 'select') {
    control = html`<select id=${id} name=${name} value=${value} onChange=${form.set(name)} ...${rest}>
      ${options.map((o) => {
        const [v, text] = Array.isArray(o) ? o : [o, o];
        return html`<option value=${v}>${text}</option>`;
      })}
    </select>`;
  } else if (as === 'textarea') {
    control = html`<textarea id=${id} name=${name} rows=${rows ?? 4} value=${value} onInput=${form.set(name)} ...${rest}></textarea>`;
  } else if (type === 'checkbox') {
    control = html`<input id=${id} name=${name} type="checkbox" checked=${!!value} onChange=${form.set(name)} ...${rest} />`;
  } else {
    control = html`<input id=${id} name=${name} type=${type} value=${value} onInput=${form.set(name)} ...${rest} />`;
  }
  return html`<div class=${`field${error ? ' invalid' : ''}`}>
    <label for=${id}>${label ?? name}</label>
    ${control}
    ${hint && html`<small class="muted">${hint}</small>`}
    ${error && html`<small class="field-error" role="alert">${error}</small>`}
  </div>`;
}
