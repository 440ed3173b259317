// The console's entry: sign-in state, the hash route, and which page it shows.
import { onSignedOut } from './lib/api.js';
import { html, render, useEffect, useState } from './lib/html.js';
import { go, tenantHref, useRoute } from './lib/route.js';
import { clearSession, isPlatform, loadSession, saveSession } from './lib/session.js';
import { SignIn } from './pages/signin.js';
import { TenantLayout } from './pages/tenant-layout.js';
import { Tenants } from './pages/tenants.js';

const home = (s) => (isPlatform(s) ? '#/tenants' : tenantHref(s.tenantId));

function App() {
  const [session, setSession] = useState(loadSession);
  const [notice, setNotice] = useState(null);
  const route = useRoute();
  useEffect(
    () =>
      onSignedOut((message) => {
        setSession(null);
        setNotice(message);
      }),
    [],
  );

  if (!session) {
    const signedIn = (s) => {
      saveSession(s);
      setSession(s);
      setNotice(null);
      go(home(s));
    };
    return html`<${SignIn} notice=${notice} onSignedIn=${signedIn} />`;
  }
  const signOut = () => {
    clearSession();
    setSession(null);
    setNotice('Signed out.');
    go('#/');
  };
  const [first, tenantId, ...rest] = route.parts;
  let page;
  if (route.invalid) {
    // A crafted or mangled link: nothing of it is requested.
    page = html`<p class="error" role="alert">Not a console address. <a href=${home(session)}>Home</a></p>`;
  } else if (first === 'tenants' && tenantId) {
    page = html`<${TenantLayout} session=${session} tenantId=${tenantId} rest=${rest} query=${route.query} />`;
  } else if (isPlatform(session)) {
    page = html`<${Tenants} session=${session} />`;
  } else {
    go(home(session));
    page = null;
  }
  return html`<div class="shell">
    <header class="top">
      <a class="brand" href=${home(session)}>Switchyard console</a>
      <span class="who" data-testid="principal">
        ${isPlatform(session) ? 'platform operator' : `${session.role} · ${session.tenantId}`}
      </span>
      <button type="button" class="link" onClick=${signOut}>Sign out</button>
    </header>
    <main>${page}</main>
  </div>`;
}

const root = document.getElementById('app');
// Preact appends to its container: the placeholder goes first.
root.replaceChildren();
render(html`<${App} />`, root);
